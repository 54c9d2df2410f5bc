// A bounded load test of the server: 64 requests from 8 concurrent clients to 127.0.0.1 (9 from 3
// on anesim) finish by themselves, none fails, no slot stays busy; p50/p95 latency and aggregate
// tokens/s are printed, not asserted. Speed — including 8 streams against one on Stories110M — is
// measured by scripts/bench_serve.py (docs/serving.md), never asserted here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

// Runs `clients` × `per_client` requests of max_tokens tokens against f and checks the outcome: none
// failed, every one completed, no slot busy and nothing queued afterwards. Returns the result.
LoadResult load_and_check(const ServeFixture& f, int clients, int per_client, int max_tokens) {
  const LoadResult r = run_load([&](const std::string& b) { return f.post("/v1/completions", b); }, clients, per_client,
                                max_tokens);
  const size_t requests = size_t(clients) * size_t(per_client);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.latencies.size(), requests);
  const json health = f.get("/health").second;
  EXPECT_EQ(health["active"], 0);
  EXPECT_EQ(health["queued"], 0);
  EXPECT_EQ(f.get("/v1/stats").second["completed"], requests);
  return r;
}

TEST(ServeLoad, SixtyFourRequestsFromEightClientsAllSucceedAndFreeEverySlot) {
  ServeFixtureOptions o;
  o.parallel = 8;
  ServeFixture f(o);
  const LoadResult r = load_and_check(f, 8, 8, 16);
  const json stats = f.get("/v1/stats").second;
  std::printf("load: 64 requests, 8 clients: p50 %.1f ms, p95 %.1f ms, %.0f tok/s aggregate, mean batch %.2f rows\n",
              1e3 * percentile(r.latencies, 0.5), 1e3 * percentile(r.latencies, 0.95), double(r.tokens) / r.seconds,
              stats["decoded_rows"].get<double>() / std::max(1.0, stats["decode_steps"].get<double>()));
}

// The same on the ANE path (anesim), smaller: base and adapter requests alternate across the slots.
TEST(ServeLoad, AnesimRequestsFromThreeClientsAllSucceedAndFreeEverySlot) {
  ServeFixtureOptions o;
  o.anesim = true, o.parallel = 3, o.ctx = 64, o.timeout_s = 600;
  ServeFixture f(o);
  load_and_check(f, 3, 3, 4);
}

}  // namespace
}  // namespace orion::test
