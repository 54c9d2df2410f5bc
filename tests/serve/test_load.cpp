// A bounded load test of the server: 64 requests from 8 concurrent clients to 127.0.0.1 finish by
// themselves, none fails, no slot stays busy; p50/p95 latency and aggregate tokens/s are printed.
// ORION_SERVE_BENCH_CONFIG=stories110m (any preset) also measures aggregate decode tokens/s of 8
// concurrent streams against one stream on random weights of that config (docs/serving.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "base/timer.h"
#include "serve_fixture.h"

namespace orion::test {
namespace {

using nlohmann::json;

struct LoadResult {
  int failed = 0;
  int64_t tokens = 0;
  double seconds = 0;
  std::vector<double> latencies;  // seconds per request, sorted
};

// `clients` threads each send `per_client` greedy completions of max_tokens tokens to the engine
// behind `post` (an HTTP POST returning status and body).
template <typename Post>
LoadResult run_load(const Post& post, int clients, int per_client, int max_tokens) {
  LoadResult r;
  std::mutex mu;
  Timer total;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; c++)
    threads.emplace_back([&, c] {
      for (int i = 0; i < per_client; i++) {
        const json body = {{"model", (c + i) % 2 ? "a1" : "base"}, {"prompt", "Once upon a time"},
                           {"max_tokens", max_tokens}, {"temperature", 0}, {"stop", json::array()}};
        Timer t;
        auto [status, reply] = post(body.dump());
        std::lock_guard lk(mu);
        r.latencies.push_back(t.seconds());
        if (status != 200) r.failed++;
        else r.tokens += reply["usage"]["completion_tokens"].template get<int64_t>();
      }
    });
  for (auto& t : threads) t.join();
  r.seconds = total.seconds();
  std::sort(r.latencies.begin(), r.latencies.end());
  return r;
}

double percentile(const std::vector<double>& sorted, double p) {
  return sorted[std::min(sorted.size() - 1, size_t(p * double(sorted.size())))];
}

TEST(ServeLoad, SixtyFourRequestsFromEightClientsAllSucceedAndFreeEverySlot) {
  ServeFixtureOptions o;
  o.parallel = 8;
  ServeFixture f(o);
  const LoadResult r = run_load([&](const std::string& b) { return f.post("/v1/completions", b); }, 8, 8, 16);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.latencies.size(), 64u);
  const json health = f.get("/health").second;
  EXPECT_EQ(health["active"], 0);
  EXPECT_EQ(health["queued"], 0);
  const json stats = f.get("/v1/stats").second;
  std::printf("load: 64 requests, 8 clients: p50 %.1f ms, p95 %.1f ms, %.0f tok/s aggregate, mean batch %.2f rows\n",
              1e3 * percentile(r.latencies, 0.5), 1e3 * percentile(r.latencies, 0.95), double(r.tokens) / r.seconds,
              stats["decoded_rows"].get<double>() / std::max(1.0, stats["decode_steps"].get<double>()));
}

// Aggregate decode speed of 8 concurrent streams against 1 on a real-sized config (random weights):
// decode is memory-bound, so 8 rows in one pass over the weights cost little more than one.
TEST(ServeLoad, EightStreamsDecodeAtLeastThreeTimesOneStream) {
  const char* config = std::getenv("ORION_SERVE_BENCH_CONFIG");
  if (!config) GTEST_SKIP() << "set ORION_SERVE_BENCH_CONFIG=stories110m to measure (takes a minute)";
  ModelConfig c = config_preset(config);
  c.seq_len = std::min(c.seq_len, 256);
  ModelWeights w = random_weights(c, 1);
  // A tokenizer that decodes every id of a 32000-token vocabulary: GPT-2's (50257 tokens).
  const std::string encoder = shared_path("tokenizers/gpt2/encoder.json");
  if (encoder.empty()) GTEST_SKIP() << "../shared/tokenizers/gpt2 is absent";
  std::unique_ptr<Tokenizer> tok = load_tokenizer(encoder);
  serve::EngineOptions eo;
  eo.parallel = 8, eo.ctx = 256;
  serve::Engine engine(w, *tok, eo);
  const std::vector<int> prompt = {1, 403, 407, 261, 931};  // a few ids inside every vocabulary
  auto decode_rate = [&](int streams) {  // decode tokens/s over `streams` concurrent 64-token requests
    std::vector<std::shared_ptr<serve::Job>> jobs;
    Timer t;
    for (int s = 0; s < streams; s++) {
      serve::GenerationParams p;
      p.prompt = prompt, p.max_tokens = 64, p.sampler.temperature = 0;
      jobs.push_back(engine.submit(p));
    }
    int64_t tokens = 0;
    for (auto& j : jobs) j->wait_all(), tokens += j->completion_tokens;
    return double(tokens) / t.seconds();
  };
  decode_rate(1);  // warm up
  const double one = decode_rate(1), eight = decode_rate(8);
  std::printf("%s decode: 1 stream %.1f tok/s, 8 streams %.1f tok/s aggregate (%.2fx)\n", config, one, eight, eight / one);
  EXPECT_GE(eight, 3.0 * one);
}

}  // namespace
}  // namespace orion::test
