// The orion command line: help on every command, exit codes by error kind, bench and demo.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/family/decode_profile.h"

#include "support.h"

namespace orion {

using test::run_orion;

TEST(Cli, HelpOnEveryCommand) {
  for (const char* cmd : {"", "demo", "generate", "tokenize", "convert", "info", "bench", "bench generate"}) {
    std::string out, err;
    EXPECT_EQ(run_orion(std::string(cmd) + " --help", &out, &err), 0) << cmd << err;
    EXPECT_NE(out.find("Usage"), std::string::npos) << cmd << ": " << out;
  }
}

TEST(Cli, UnknownCommandAndBadFlagsAreUsageErrors) {
  std::string out, err;
  EXPECT_EQ(run_orion("frobnicate", &out, &err), 2);
  EXPECT_NE(err.find("orion: usage error"), std::string::npos) << err;
  EXPECT_EQ(run_orion("bench generate --config nope", &out, &err), 2);
  EXPECT_EQ(run_orion("generate --model x.bin --temperature -1", &out, &err), 2);
}

// The hint names the whole command the bad flag belongs to, subcommands of subcommands included.
TEST(Cli, UsageErrorHintNamesTheFullCommand) {
  std::string out, err;
  EXPECT_EQ(run_orion("bench train --overlap-dw maybe", &out, &err), 2);
  EXPECT_NE(err.find("hint: run `orion bench train --help`"), std::string::npos) << err;
  EXPECT_EQ(run_orion("generate --bogus-flag", &out, &err), 2);
  EXPECT_NE(err.find("hint: run `orion generate --help`"), std::string::npos) << err;
}

TEST(Cli, MissingModelFileIsAnInputErrorNamingIt) {
  std::string out, err;
  EXPECT_EQ(run_orion("generate --model /nonexistent/m.bin --tokenizer /nonexistent/t.bin", &out, &err), 3);
  EXPECT_NE(err.find("/nonexistent/"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "one line: " << err;
}

// `orion bench generate <args> --json`, which must succeed, as parsed JSON.
nlohmann::json bench_generate_json(const std::string& args) {
  std::string out, err;
  EXPECT_EQ(run_orion("bench generate " + args + " --json", &out, &err), 0) << err;
  return nlohmann::json::parse(out.empty() ? "{}" : out);
}

TEST(Cli, BenchGenerateJson) {
  auto j = bench_generate_json("--config stories260k --prompt-len 16 --decode-len 8 --repeat 1 --no-bandwidth");
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["config"], "stories260k");
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["prefill_tok_s"].get<double>(), 0);
  // The weights were resident, so the peak is at least their size; and nowhere near 24 GB.
  EXPECT_GE(j["peak_rss_bytes"].get<double>(), j["weight_bytes"].get<double>());
  EXPECT_LT(j["peak_rss_bytes"].get<double>(), 4e9);
  // The prefill bound: the GEMM peak measured in the same run, Orion's path always, and the
  // prefill tok/s set against it.
  EXPECT_GT(j["gemm_orion_gflops"].get<double>(), 0);
  EXPECT_GT(j["prefill_bound_tok_s"].get<double>(), 0);
  EXPECT_NEAR(j["prefill_efficiency"].get<double>(),
              j["prefill_tok_s"].get<double>() / j["prefill_bound_tok_s"].get<double>(), 1e-9);
}

// The decode bound: the read bandwidth of passes over a token's bytes between the best decode run's
// tokens, over the bytes a decode step reads; the STREAM triad beside it.
TEST(Cli, BenchGenerateBoundIsTheReadBandwidthOverTheBytesPerToken) {
  auto j = bench_generate_json("--config stories260k --prompt-len 8 --decode-len 8 --repeat 2 --no-gemm-peak "
                               "--threads 1");
  ASSERT_FALSE(j.empty());
  const double read = j["read_gb_s"].get<double>(), bytes = j["bytes_per_token"].get<double>();
  EXPECT_GT(read, 0);
  EXPECT_GT(j["stream_triad_gb_s"].get<double>(), 0);
  EXPECT_GT(bytes, 0);
  EXPECT_NEAR(j["bandwidth_bound_tok_s"].get<double>(), read * 1e9 / bytes, 1e-9 * read * 1e9 / bytes);
  EXPECT_NEAR(j["bandwidth_efficiency"].get<double>(),
              j["decode_tok_s"].get<double>() / j["bandwidth_bound_tok_s"].get<double>(), 1e-9);
  // The peak memory is the model's run, not the STREAM triad's arrays measured after it.
  EXPECT_LT(j["peak_rss_bytes"].get<double>(), 200e6);
}

// --model: a file's weights as `orion generate` loads them (memory-mapped), in the dtype stored
// (or --dtype's); the report names the file. With --config it is a usage error, a missing file an
// input error naming it.
TEST(Cli, BenchGenerateOnAModelFile) {
  const std::string dir = test::temp_dir(), model = dir + "/m.gguf";
  std::string out, err;
  ASSERT_EQ(run_orion("convert --config stories260k --out " + model + " --dtype f16", &out, &err), 0) << err;
  const std::string run = " --prompt-len 8 --decode-len 4 --repeat 1 --no-gemm-peak --threads 1";
  auto j = bench_generate_json("--model " + model + run);
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["config"], model);
  EXPECT_EQ(j["dtype"], "f16");
  EXPECT_EQ(j["params"].get<int64_t>(), config_preset("stories260k").num_params());
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["bandwidth_bound_tok_s"].get<double>(), 0);
  auto f32 = bench_generate_json("--model " + model + " --dtype f32" + run);
  ASSERT_FALSE(f32.empty());
  EXPECT_EQ(f32["dtype"], "f32");
  EXPECT_DOUBLE_EQ(f32["weight_bytes"].get<double>(), 2 * j["weight_bytes"].get<double>());
  EXPECT_EQ(run_orion("bench generate --model " + model + " --config stories15m", &out, &err), 2);
  EXPECT_EQ(run_orion("bench generate --model " + dir + "/missing.gguf", &out, &err), 3);
  EXPECT_NE(err.find("missing.gguf"), std::string::npos) << err;
}

TEST(Cli, BenchGenerateGemmPathIsChosenAndReported) {
  auto j = bench_generate_json("--config stories260k --prompt-len 70 --decode-len 2 --repeat 1 --no-bandwidth "
                               "--no-gemm-peak --gemm orion");
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["prefill_gemm"], "orion");
  EXPECT_EQ(j["prefill_bound_tok_s"].get<double>(), 0) << "--no-gemm-peak skips it";
}

// --phases: each thread's time per decode token in each phase of the decode step, measured inside
// the step, so a thread's phases add up to no more than the token's time measured around it.
TEST(Cli, BenchGeneratePhasesAddUpToNoMoreThanAToken) {
  auto j = bench_generate_json("--config stories260k --prompt-len 8 --decode-len 8 --repeat 1 --no-bandwidth "
                               "--no-gemm-peak --threads 2 --phases");
  ASSERT_TRUE(j.contains("decode_phase_us")) << j.dump();
  const nlohmann::json& phases = j["decode_phase_us"];
  EXPECT_EQ(phases.size(), size_t(DecodeProfile::kPhases));
  const double token_us = 1e6 / j["decode_tok_s"].get<double>();
  for (size_t t = 0; t < 2; t++) {
    double sum = 0;
    for (int p = 0; p < DecodeProfile::kPhases; p++) {
      const nlohmann::json& per_thread = phases[DecodeProfile::name(DecodeProfile::Phase(p))];
      ASSERT_EQ(per_thread.size(), 2u) << DecodeProfile::name(DecodeProfile::Phase(p));
      EXPECT_GE(per_thread[t].get<double>(), 0);
      sum += per_thread[t].get<double>();
    }
    EXPECT_GT(sum, 0) << "thread " << t;
    EXPECT_LE(sum, token_us * (1 + 1e-6)) << "thread " << t;
  }
  EXPECT_GT(phases["classifier"][0].get<double>(), 0);
  // The bytes of each phase, counted from the config: q/k/v rows and the KV cache at the mean decode
  // position (prompt 8 + 8/2 → positions 0 … 12) in the attention's phase, the other matrices in
  // theirs, the waits none; together a token's bytes.
  ASSERT_TRUE(j.contains("decode_phase_bytes")) << j.dump();
  const nlohmann::json& bytes = j["decode_phase_bytes"];
  const ModelConfig c = config_preset("stories260k");
  const double e = j["dtype"] == "f32" ? 4 : 2, C = c.dim, KV = c.kv_dim(), H = c.hidden_dim, L = c.n_layers;
  ASSERT_TRUE(j["dtype"] == "f32" || j["dtype"] == "f16") << j["dtype"];
  EXPECT_DOUBLE_EQ(bytes["attention"].get<double>(), L * (e * C * (C + 2 * KV) + 4.0 * 2 * KV * 13));
  EXPECT_DOUBLE_EQ(bytes["wo"].get<double>(), L * e * C * C);
  EXPECT_DOUBLE_EQ(bytes["ffn in"].get<double>(), L * e * 2 * C * H);
  EXPECT_DOUBLE_EQ(bytes["ffn out"].get<double>(), L * e * H * C);
  EXPECT_DOUBLE_EQ(bytes["classifier"].get<double>(), e * c.vocab_size * C);
  double total = 0;
  for (int p = 0; p < DecodeProfile::kPhases; p++) {
    const double b = bytes[DecodeProfile::name(DecodeProfile::Phase(p))].get<double>();
    if (std::string(DecodeProfile::name(DecodeProfile::Phase(p))).rfind("wait", 0) == 0) EXPECT_EQ(b, 0);
    total += b;
  }
  EXPECT_NEAR(total, j["bytes_per_token"].get<double>(), 1e-9 * total);
  EXPECT_FALSE(bench_generate_json("--config stories260k --prompt-len 8 --decode-len 2 --repeat 1 --no-bandwidth "
                                   "--no-gemm-peak")
                   .contains("decode_phase_us"));
  std::string out, err;
  EXPECT_EQ(run_orion("bench generate --config stories260k --phases --backend anesim", &out, &err), 2);
  EXPECT_NE(err.find("--phases"), std::string::npos) << err;
}

// --streams N: N sequences decode together through the server's engine; their bound reads the
// weights once for all N (so it passes N single-stream bounds' worth of tokens only by the KV
// caches' share) and cannot pass the GEMM peak's tokens per second.
TEST(Cli, BenchGenerateStreamsDecodeTogetherAgainstTheirBound) {
  auto j = bench_generate_json("--config stories260k --prompt-len 8 --decode-len 8 --repeat 1 --streams 3 --threads 1");
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["streams"], 3);
  const double bound = j["batched_bound_tok_s"].get<double>(), single = j["bandwidth_bound_tok_s"].get<double>();
  const double compute = j["prefill_bound_tok_s"].get<double>();
  EXPECT_GT(j["batched_decode_tok_s"].get<double>(), 0);
  EXPECT_GT(single, 0);
  EXPECT_GE(bound, std::min(single, compute) * (1 - 1e-9));  // no fewer than one stream's bound
  EXPECT_LE(bound, std::min(3 * single, compute) * (1 + 1e-9));
  EXPECT_NEAR(j["batched_efficiency"].get<double>(), j["batched_decode_tok_s"].get<double>() / bound, 1e-9);
  std::string out, err;
  EXPECT_EQ(run_orion("bench generate --config stories260k --streams 2 --backend anesim", &out, &err), 2);
  EXPECT_NE(err.find("--streams"), std::string::npos) << err;
}

TEST(Cli, DemoRunsWithNoFiles) {
  std::string out, err;
  ASSERT_EQ(run_orion("demo --steps 5 --stories 100 --batch 2 --seq 32 -n 8 --threads 1", &out, &err), 0) << err;
  EXPECT_NE(out.find("decode"), std::string::npos) << out;
}

}  // namespace orion
