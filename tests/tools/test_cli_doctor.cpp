// `orion doctor`: every field is there, in text and JSON, and what it says about the CPU is what
// the dispatch in this process reports (the child runs the same binary code on the same machine).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "compiler/chip.h"
#include "runtime/cpu/kernel_paths.h"
#include "runtime/cpu/kernels.h"
#include "support.h"

namespace orion {
namespace {

nlohmann::json doctor_json() {
  std::string out, err;
  EXPECT_EQ(test::run_orion("doctor --json", &out, &err), 0) << err;
  return nlohmann::json::parse(out);
}

TEST(CliDoctor, JsonHasEveryField) {
  const nlohmann::json j = doctor_json();
  for (const char* key :
       {"cpu", "kernels", "threads", "mpi", "python_binding", "blas", "prompt_gemm", "ane", "chip", "compile_budget"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_FALSE(j["cpu"]["model"].get<std::string>().empty());
  EXPECT_GE(j["threads"].get<int>(), 1);
  EXPECT_TRUE(j["mpi"].is_boolean());
  EXPECT_TRUE(j["python_binding"].is_boolean());
  EXPECT_TRUE(j["ane"]["available"].is_boolean());
  // The prompt GEMM path is the one this process's kernels report (the child inherits ORION_GEMM).
  EXPECT_EQ(j["prompt_gemm"]["path"], cpu::prefill_gemm_name(cpu::prefill_gemm()));
  EXPECT_EQ(j["prompt_gemm"]["onednn_built_in"].get<bool>(), cpu::prefill_gemm_available(cpu::PrefillGemm::OneDnn));
  const std::string chip = j["chip"]["profile"];
  EXPECT_EQ(j["compile_budget"]["limit"].get<int>(), compiler::chip_profile(chip).compile_budget);
  EXPECT_EQ(j["compile_budget"]["warn_at"].get<int>(), (compiler::chip_profile(chip).compile_budget * 9 + 9) / 10);
#ifndef __APPLE__
  EXPECT_FALSE(j["ane"]["available"].get<bool>());
  EXPECT_EQ(j["ane"]["message"], "not a Mac: the ANE backend is unavailable; anesim runs the same programs");
  EXPECT_FALSE(j["chip"]["detected"].get<bool>());
  EXPECT_EQ(chip, compiler::default_chip().name);
#endif
}

TEST(CliDoctor, CpuFeaturesAndKernelPathsAreWhatTheDispatchReports) {
  const nlohmann::json j = doctor_json();
  const std::vector<cpu::CpuFeature> features = cpu::cpu_features();
  ASSERT_EQ(j["cpu"]["features"].size(), features.size());
  for (const cpu::CpuFeature& f : features) EXPECT_EQ(j["cpu"]["features"][f.name].get<bool>(), f.present) << f.name;
  EXPECT_EQ(j["cpu"]["isa"], cpu::isa_name(cpu::active_isa()));
  for (const cpu::KernelPath& k : cpu::kernel_paths()) EXPECT_EQ(j["kernels"][k.family], k.path) << k.family;
  EXPECT_TRUE(j["kernels"].contains("anesim matmul"));
  // The instruction set follows the features: AVX-512 only with every AVX-512 subset it needs.
  if (j["cpu"]["isa"] == "avx512")
    for (const char* f : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"})
      EXPECT_TRUE(j["cpu"]["features"][f].get<bool>()) << f;
}

// ORION_VNNI=off (to measure, on a newer core, a machine without VNNI): the q8_0 kernels take their
// path without it, while the features still say what the CPU has.
TEST(CliDoctor, VnniOffInTheEnvironmentTakesTheQ8PathWithoutIt) {
  ASSERT_EQ(setenv("ORION_VNNI", "off", 1), 0);
  const nlohmann::json j = doctor_json();
  unsetenv("ORION_VNNI");
  EXPECT_EQ(j["kernels"]["q8_0 dot"], j["cpu"]["isa"]) << j["kernels"].dump();
  for (const cpu::CpuFeature& f : cpu::cpu_features()) EXPECT_EQ(j["cpu"]["features"][f.name].get<bool>(), f.present) << f.name;
  // and without it, the path this process reports (with VNNI where the CPU has it)
  const nlohmann::json with = doctor_json();
  for (const cpu::KernelPath& k : cpu::kernel_paths())
    if (k.family == "q8_0 dot") EXPECT_EQ(with["kernels"][k.family], k.path);
}

TEST(CliDoctor, TextNamesEverySectionAndHelpDescribesJson) {
  std::string out, err;
  ASSERT_EQ(test::run_orion("doctor", &out, &err), 0) << err;
  for (const char* label : {"cpu:", "cpu features:", "instruction set:", "kernels:", "threads:", "blas:", "mpi:",
                            "python binding:", "ane:", "chip profile:", "compile budget:"})
    EXPECT_NE(out.find(label), std::string::npos) << label << "\n" << out;
  EXPECT_NE(out.find(cpu::isa_name(cpu::active_isa())), std::string::npos);
  ASSERT_EQ(test::run_orion("doctor --help", &out, &err), 0) << err;
  EXPECT_NE(out.find("--json"), std::string::npos) << out;
  ASSERT_EQ(test::run_orion("--help", &out, &err), 0) << err;
  EXPECT_NE(out.find("doctor"), std::string::npos);
}

}  // namespace
}  // namespace orion
