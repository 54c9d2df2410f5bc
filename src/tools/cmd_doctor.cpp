// `orion doctor`: what this machine and this build of Orion can do — the CPU and the features the
// kernels look for, the path each kernel family takes, threads, what the build includes (MPI, the
// Python binding), whether the ANE is reachable and which chip profile applies, and the compile
// budget. `--json` prints the same as one object.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <string>

#ifdef __APPLE__
#include <sys/sysctl.h>
#endif

#include "compiler/chip.h"
#include "runtime/ane/ane_driver.h"
#include "runtime/anesim/anesim_gemm.h"
#include "runtime/compile_budget.h"
#include "runtime/cpu/kernel_paths.h"
#include "runtime/cpu/kernels.h"
#include "tools/command.h"
#include "train/dist/communicator.h"

namespace orion::tools {
namespace {

using nlohmann::json;

struct DoctorArgs {
  bool json = false;
};

// The CPU's marketing name: /proc/cpuinfo's "model name" on Linux, the brand string on macOS.
std::string cpu_model() {
#ifdef __APPLE__
  char brand[256] = {};
  size_t n = sizeof(brand);
  if (sysctlbyname("machdep.cpu.brand_string", brand, &n, nullptr, 0) == 0) return brand;
#endif
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "unknown";
}

// "Apple M4 Max" → "m4": the chip profile of an Apple CPU name ("" when it names none we know).
std::string chip_from_cpu_model(const std::string& model) {
  std::smatch m;
  if (!std::regex_search(model, m, std::regex("Apple M([0-9]+)"))) return "";
  const std::string name = "m" + m[1].str();
  for (const std::string& known : compiler::chip_names())
    if (known == name) return name;
  return "";
}

// Whether the ANE driver opens: on macOS it loads the private framework; elsewhere it cannot.
json ane_status() {
#ifdef __APPLE__
  try {
    runtime::make_ane_driver({});
    return {{"available", true}, {"message", "AppleNeuralEngine.framework loaded: --backend ane works"}};
  } catch (const std::exception& e) {
    return {{"available", false}, {"message", std::string("the framework did not load: ") + e.what()}};
  }
#else
  // Off macOS only a test fake of the framework can be named (ORION_ANE_FRAMEWORK, with the driver
  // module in ORION_ANE_DRIVER_MODULE): say whether the driver opens it.
  const char* fake = std::getenv("ORION_ANE_FRAMEWORK");
  if (fake && *fake) {
    try {
      runtime::make_ane_driver({});
      return {{"available", true}, {"message", std::string("not a Mac; the driver opened the framework named by "
                                                           "ORION_ANE_FRAMEWORK (a test fake): ") + fake}};
    } catch (const std::exception& e) {
      return {{"available", false}, {"message", std::string("not a Mac, and the framework named by "
                                                            "ORION_ANE_FRAMEWORK did not open: ") + e.what()}};
    }
  }
  return {{"available", false}, {"message", "not a Mac: the ANE backend is unavailable; anesim runs the same programs"}};
#endif
}

json diagnose() {
  json j;
  const std::string model = cpu_model();
  j["cpu"]["model"] = model;
  for (const cpu::CpuFeature& f : cpu::cpu_features()) j["cpu"]["features"][f.name] = f.present;
  j["cpu"]["isa"] = cpu::isa_name(cpu::active_isa());
  if (!cpu::isa_request_refused().empty()) j["cpu"]["isa_request_refused"] = cpu::isa_request_refused();
  for (const cpu::KernelPath& k : cpu::kernel_paths()) j["kernels"][k.family] = k.path;
  j["kernels"]["anesim matmul"] = runtime::anesim::gemm_fixed_order_path();
  j["threads"] = cpu::num_threads();
  j["mpi"] = train::dist::built_with_mpi();
#ifdef ORION_PYTHON_BINDING
  j["python_binding"] = true;
#else
  j["python_binding"] = false;
#endif
  // OpenBLAS is linked only into bench/ (the reference GEMM); oneDNN, when built in, can take
  // prompt-sized products (runtime/cpu/gemm_library.cpp).
  const bool onednn = cpu::prefill_gemm_available(cpu::PrefillGemm::OneDnn);
  j["blas"] = std::string(onednn ? "oneDNN built in" : "oneDNN not built in") + "; prompt GEMMs: " +
              cpu::prefill_gemm_name(cpu::prefill_gemm()) +
              (onednn ? " (ORION_GEMM=onednn|orion chooses)" : " (install libdnnl-dev and rebuild for oneDNN)") +
              "; OpenBLAS is only bench/'s reference GEMM";
  j["prompt_gemm"] = {{"path", cpu::prefill_gemm_name(cpu::prefill_gemm())}, {"onednn_built_in", onednn}};
  j["ane"] = ane_status();
  const std::string detected = chip_from_cpu_model(model);
  const compiler::ChipProfile& chip = detected.empty() ? compiler::default_chip() : compiler::chip_profile(detected);
  j["chip"] = {{"profile", chip.name}, {"detected", !detected.empty()}};
  const runtime::CompileBudget budget(chip.compile_budget);
  j["compile_budget"] = {{"limit", budget.limit()}, {"warn_at", budget.warn_at()}, {"chip", chip.name}};
  return j;
}

void print_text(const json& j) {
  std::printf("cpu:            %s\n", j["cpu"]["model"].get<std::string>().c_str());
  std::string have, lack;
  for (auto& [name, present] : j["cpu"]["features"].items()) (present.get<bool>() ? have : lack) += " " + name;
  std::printf("cpu features:  %s%s\n", have.empty() ? " none" : have.c_str(),
              lack.empty() ? "" : ("   (lacks" + lack + ")").c_str());
  std::printf("instruction set: %s", j["cpu"]["isa"].get<std::string>().c_str());
  if (j["cpu"].contains("isa_request_refused"))
    std::printf("  (%s)", j["cpu"]["isa_request_refused"].get<std::string>().c_str());
  std::printf("\nkernels:\n");
  size_t width = 0;
  for (auto& [family, path] : j["kernels"].items()) width = std::max(width, family.size());
  for (auto& [family, path] : j["kernels"].items())
    std::printf("  %-*s  %s\n", int(width), family.c_str(), path.get<std::string>().c_str());
  std::printf("threads:        %d\n", j["threads"].get<int>());
  std::printf("blas:           %s\n", j["blas"].get<std::string>().c_str());
  std::printf("mpi:            %s\n", j["mpi"].get<bool>() ? "built in: orion train runs data-parallel under mpirun"
                                                           : "not built in: orion train runs as one process");
  std::printf("python binding: %s\n", j["python_binding"].get<bool>() ? "built" : "not built");
  std::printf("ane:            %s\n", j["ane"]["message"].get<std::string>().c_str());
  const std::string chip = j["chip"]["profile"];
  std::printf("chip profile:   %s%s\n", chip.c_str(),
              j["chip"]["detected"].get<bool>() ? " (detected from the CPU name)"
                                                : " (the default; not detected on this machine; --chip picks another)");
  std::printf("compile budget: %d compiles per process on %s, a warning at %d\n", j["compile_budget"]["limit"].get<int>(),
              chip.c_str(), j["compile_budget"]["warn_at"].get<int>());
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  auto args = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand("doctor", "Say what this machine and build can do: CPU paths, MPI, Python, the ANE");
  cmd->footer(
      "Reports the CPU model and the features Orion's kernels use, the path each kernel family takes (set by\n"
      "ORION_ISA or the best the CPU has), threads, whether MPI and the Python binding are built in, whether the\n"
      "ANE framework loads (macOS only; elsewhere anesim runs the same programs), the chip profile and its\n"
      "compile budget.\n"
      "Example: orion doctor;  orion doctor --json");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->callback([args] {
    const json j = diagnose();
    if (args->json) std::printf("%s\n", j.dump(2).c_str());
    else print_text(j);
  });
}

}  // namespace orion::tools
