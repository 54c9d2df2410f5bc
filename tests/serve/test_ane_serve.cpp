// orion serve on the ANE path, in-process on anesim (infer/ane_slot_decoder.h): greedy completions
// equal generate() on one AneModel — also when requests with different adapters decode together —
// and an adapter added and removed at run time compiles nothing.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "serve_fixture.h"

namespace orion::test {
namespace {

using nlohmann::json;

constexpr int kTokens = 6;
const char* const kPrompt = "Once upon a time";

ServeFixtureOptions anesim_options(int parallel) {
  ServeFixtureOptions o;
  o.anesim = true, o.parallel = parallel, o.ctx = 64, o.timeout_s = 600;
  return o;
}

// The text of a greedy completion of kPrompt by `model`; "" (and a failure) when it is not a 200.
std::string complete(const ServeFixture& f, const std::string& model) {
  auto [status, r] = f.post("/v1/completions", json{{"model", model}, {"prompt", kPrompt}, {"max_tokens", kTokens},
                                                     {"temperature", 0}}.dump());
  EXPECT_EQ(status, 200) << model << ": " << r.dump();
  return status == 200 ? r["choices"][0]["text"].get<std::string>() : "";
}

TEST(ServeAnesim, RequestsWithDifferentAdaptersDecodingTogetherEachEqualTheirSingleRequestOutput) {
  ServeFixture f(anesim_options(3));
  const auto a2 = fixture_adapter(f.weights.config, {LoraTarget::Q, LoraTarget::V}, 5, 7);
  f.engine->add_adapter("a2", a2);
  std::map<std::string, std::string> text;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (const char* model : {"base", "a1", "a2"})
    clients.emplace_back([&, model] {
      const std::string t = complete(f, model);
      std::lock_guard lk(mu);
      text[model] = t;
    });
  for (auto& c : clients) c.join();
  const std::string base = as_json_text(f.reference(kPrompt, kTokens)),
                    one = as_json_text(f.reference(kPrompt, kTokens, f.adapter.get())),
                    two = as_json_text(f.reference(kPrompt, kTokens, a2.get()));
  EXPECT_EQ(text["base"], base);
  EXPECT_EQ(text["a1"], one);
  EXPECT_EQ(text["a2"], two);
  // The adapters change the text, so the equalities above tell the rows' adapters apart.
  EXPECT_NE(one, base);
  EXPECT_NE(two, one);
  // The three were in flight together: steps decoded more than one row (a prefill on anesim takes
  // far longer than the three requests take to arrive).
  const json stats = f.get("/v1/stats").second;
  EXPECT_GT(stats["decoded_rows"].get<int>(), stats["decode_steps"].get<int>()) << stats.dump();
}

TEST(ServeAnesim, AnAdapterAddedAndRemovedAtRunTimeCompilesNothing) {
  ServeFixture f(anesim_options(2));
  const std::string base = complete(f, "base");  // compiles this prompt's prefill bucket and the decode programs
  const int compiles = f.get("/health").second["compiles"].get<int>();
  EXPECT_GT(compiles, 0);

  const std::string dir = temp_dir();
  const auto a2 = fixture_adapter(f.weights.config, {LoraTarget::Q, LoraTarget::V}, 5, 7);
  save_lora(*a2, dir + "/a2.olora", LoraFormat::Orion);
  auto [added, reply] = f.post("/v1/adapters", json{{"name", "a2"}, {"path", dir + "/a2.olora"}}.dump());
  ASSERT_EQ(added, 201) << reply.dump();
  EXPECT_EQ(complete(f, "a2"), as_json_text(f.reference(kPrompt, kTokens, a2.get())));
  auto removed = f.client().Delete("/v1/adapters/a2");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->status, 200);
  EXPECT_EQ(complete(f, "base"), base);

  // Adapters the compiled programs cannot take are refused rather than compiled for: a rank above
  // the slot, and a target other than q and v.
  LoraAdapter wide(f.weights.config, 2 * kFixtureLoraRank, 8.0f, {LoraTarget::Q, LoraTarget::V});
  LoraAdapter ffn(f.weights.config, kFixtureLoraRank, 8.0f, {LoraTarget::Q, LoraTarget::W2});
  save_lora(wide, dir + "/wide.olora", LoraFormat::Orion);
  save_lora(ffn, dir + "/ffn.olora", LoraFormat::Orion);
  for (const char* name : {"wide", "ffn"}) {
    auto [status, r] = f.post("/v1/adapters", json{{"name", name}, {"path", dir + "/" + name + ".olora"}}.dump());
    EXPECT_EQ(status, 400) << name;
  }
  EXPECT_EQ(f.get("/health").second["compiles"].get<int>(), compiles);
  EXPECT_EQ(f.get("/v1/stats").second["compiles"].get<int>(), compiles);
}

// The CPU engine compiles nothing: /health says nothing about compiles.
TEST(ServeAnesim, TheCpuBackendReportsNoCompiles) {
  ServeFixture f;
  EXPECT_FALSE(f.get("/health").second.contains("compiles"));
}

}  // namespace
}  // namespace orion::test
