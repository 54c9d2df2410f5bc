// LoRA adapters on the CPU: a zero adapter leaves the logits bit for bit; unmerged (Transformer with
// set_lora) and merged (merge_lora) agree; the files (Orion's and PEFT's) read back identically with
// PEFT's names and shapes for GPT-2 and Llama; malformed files give clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "model/frontend_test_util.h"
#include "model/io/io_internal.h"
#include "model/lora/lora_io.h"
#include "model/transformer.h"
#include "support.h"

namespace orion {
namespace {
namespace fs = std::filesystem;

ModelConfig tiny(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 32, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4;
  c.n_kv_heads = arch == Arch::GPT2 ? 4 : 2;  // Llama with GQA: k/v adapters are narrower
  c.vocab_size = c.padded_vocab = 50, c.seq_len = 32;
  c.validate("test");
  return c;
}

// An adapter with random A and B (a trained one: B ≠ 0).
LoraAdapter random_adapter(const ModelConfig& c, const std::string& targets, int rank, float alpha, uint64_t seed) {
  return test::trained_like_adapter(c, rank, alpha, seed, parse_lora_targets(targets, c.arch), 0.05f);
}

std::vector<float> logits(const ModelWeights& w, const LoraAdapter* a, float scale = 1.0f) {
  Transformer tf(w);
  tf.set_lora(a, scale);
  const int tokens[] = {1, 7, 3, 9, 4, 22, 17, 5};
  const float* l = tf.forward(tokens, 8, 0, /*all_logits=*/true);
  return std::vector<float>(l, l + 8 * w.config.vocab_size);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); i++) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

class lora_cpu : public ::testing::TestWithParam<Arch> {};

TEST_P(lora_cpu, ZeroAdapterGivesExactlyTheBaseLogits) {
  const ModelConfig c = tiny(GetParam());
  const ModelWeights w = test::test_weights(c, 3, 4.0f);
  LoraAdapter a(c, 8, 16.0f, parse_lora_targets("all", c.arch));
  a.init(5);  // A random, B = 0: the adapter as training starts it
  const auto base = logits(w, nullptr), with = logits(w, &a);
  EXPECT_EQ(0, std::memcmp(base.data(), with.data(), base.size() * sizeof(float)));
  const ModelWeights merged = merge_lora(w, a);
  const auto m = logits(merged, nullptr);
  EXPECT_EQ(0, std::memcmp(base.data(), m.data(), base.size() * sizeof(float)));
}

TEST_P(lora_cpu, MergedAndUnmergedGiveTheSameLogits) {
  const ModelConfig c = tiny(GetParam());
  const ModelWeights w = test::test_weights(c, 3, 4.0f);
  for (const char* targets : {"q,v", "all"}) {
    SCOPED_TRACE(targets);
    const LoraAdapter a = random_adapter(c, targets, 4, 8.0f, 11);
    const auto base = logits(w, nullptr), unmerged = logits(w, &a), merged = logits(merge_lora(w, a), nullptr);
    EXPECT_GT(max_abs_diff(base, unmerged), 1e-3) << "the adapter must change the logits";
    EXPECT_LT(max_abs_diff(unmerged, merged), 2e-5);  // fp32: the same sum in another order
    // --lora-scale: half the update, both ways.
    const auto half_unmerged = logits(w, &a, 0.5f), half_merged = logits(merge_lora(w, a, 0.5f), nullptr);
    EXPECT_LT(max_abs_diff(half_unmerged, half_merged), 2e-5);
    EXPECT_GT(max_abs_diff(half_unmerged, unmerged), 1e-4);
  }
  // fp16 base weights: the merge rounds W + s·B·A to fp16 once.
  ModelWeights w16 = w;
  w16.convert_matrices(DType::F16);
  const LoraAdapter a = random_adapter(c, "q,v,o,w1", 4, 8.0f, 12);
  const auto unmerged = logits(w16, &a), merged = logits(merge_lora(w16, a), nullptr);
  double scale = 0;
  for (float x : unmerged) scale = std::max(scale, double(std::fabs(x)));
  EXPECT_LT(max_abs_diff(unmerged, merged), 5e-3 * scale);
}

INSTANTIATE_TEST_SUITE_P(Arch, lora_cpu, ::testing::Values(Arch::Llama, Arch::GPT2),
                         [](const auto& i) { return std::string(arch_name(i.param)); });

void expect_same_adapter(const LoraAdapter& a, const LoraAdapter& b) {
  ASSERT_EQ(a.rank(), b.rank());
  EXPECT_EQ(a.alpha(), b.alpha());
  ASSERT_EQ(a.targets(), b.targets());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "tensors differ";
}

class lora_files : public ::testing::TestWithParam<Arch> {};

TEST_P(lora_files, OrionFormatReadsBackIdentically) {
  const ModelConfig c = tiny(GetParam());
  const LoraAdapter a = random_adapter(c, "q,k,v,o", 4, 8.0f, 21);
  const std::string dir = test::temp_dir() + "/own";
  save_lora(a, dir, LoraFormat::Orion);
  expect_same_adapter(a, load_lora(dir, c));
  expect_same_adapter(a, load_lora(dir + "/adapter.olora", c));
}

TEST_P(lora_files, PeftLayoutReadsBackIdenticallyWithPeftNamesAndShapes) {
  const ModelConfig c = tiny(GetParam());
  const bool gpt2 = c.arch == Arch::GPT2;
  const int r = 4, C = c.dim, KV = c.kv_dim(), H = c.hidden_dim;
  for (const char* targets : {"q,v", "all"}) {
    SCOPED_TRACE(targets);
    const LoraAdapter a = random_adapter(c, targets, r, 8.0f, 31);
    const std::string dir = test::temp_dir() + "/peft";
    save_lora(a, dir, LoraFormat::Peft, "tiny");
    expect_same_adapter(a, load_lora(dir, c));
    // Names and shapes as PEFT writes them.
    io::SafetensorsFile st = io::SafetensorsFile::open(dir + "/adapter_model.safetensors");
    auto shape = [&](const std::string& name) {
      const io::SafetensorsEntry* e = st.find(name);
      EXPECT_TRUE(e) << name << " missing";
      return e ? e->shape : std::vector<int64_t>{};
    };
    auto cfg = nlohmann::json::parse(read_text_file(dir + "/adapter_config.json"));
    EXPECT_EQ(cfg["peft_type"], "LORA");
    EXPECT_EQ(cfg["r"], r);
    EXPECT_EQ(cfg["fan_in_fan_out"], gpt2);
    const bool all = std::string(targets) == "all";
    if (gpt2) {
      const int m = all ? 3 : 2;  // q, (k,) v fused into c_attn
      const std::string p = "base_model.model.transformer.h.1.";
      EXPECT_EQ(shape(p + "attn.c_attn.lora_A.weight"), (std::vector<int64_t>{m * r, C}));
      EXPECT_EQ(shape(p + "attn.c_attn.lora_B.weight"), (std::vector<int64_t>{3 * C, m * r}));
      EXPECT_EQ(cfg["rank_pattern"]["c_attn"], m * r);
      EXPECT_FLOAT_EQ(cfg["alpha_pattern"]["c_attn"].get<float>(), m * 8.0f);
      if (all) {
        EXPECT_EQ(shape(p + "mlp.c_fc.lora_B.weight"), (std::vector<int64_t>{H, r}));
        EXPECT_EQ(shape(p + "mlp.c_proj.lora_A.weight"), (std::vector<int64_t>{r, H}));
        EXPECT_EQ(shape(p + "attn.c_proj.lora_A.weight"), (std::vector<int64_t>{r, C}));
      }
      EXPECT_EQ(st.entries().size(), size_t(c.n_layers) * 2 * (all ? 4 : 1));
    } else {
      const std::string p = "base_model.model.model.layers.1.";
      EXPECT_EQ(shape(p + "self_attn.q_proj.lora_A.weight"), (std::vector<int64_t>{r, C}));
      EXPECT_EQ(shape(p + "self_attn.q_proj.lora_B.weight"), (std::vector<int64_t>{C, r}));
      EXPECT_EQ(shape(p + "self_attn.v_proj.lora_B.weight"), (std::vector<int64_t>{KV, r}));
      if (all) {
        EXPECT_EQ(shape(p + "mlp.gate_proj.lora_B.weight"), (std::vector<int64_t>{H, r}));
        EXPECT_EQ(shape(p + "mlp.down_proj.lora_A.weight"), (std::vector<int64_t>{r, H}));
        EXPECT_EQ(shape(p + "mlp.up_proj.lora_A.weight"), (std::vector<int64_t>{r, C}));
      }
      EXPECT_EQ(st.entries().size(), size_t(c.n_layers) * 2 * (all ? 7 : 2));
    }
  }
}

// A PEFT adapter as Python would write it (no Orion record): GPT-2's c_attn with one shared A,
// module ranks and alphas that differ. Read into Orion's adapter, it gives the same merged weights
// as PEFT's own merge, W += (alpha_m/r_m)·B·A per module.
TEST_P(lora_files, ForeignPeftAdapterMergesAsPeftDoes) {
  const ModelConfig c = tiny(GetParam());
  const bool gpt2 = c.arch == Arch::GPT2;
  const ModelWeights w = test::test_weights(c, 3, 4.0f);
  // Write it by hand from our own writer's pieces: every module of layer 0 with rank 2 or 3.
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 0.1f);
  std::vector<std::vector<float>> store;
  std::vector<Tensor> tensors;
  std::vector<io::SafetensorsOut> out;
  tensors.reserve(16);
  auto add = [&](const std::string& module, int64_t rank, int64_t o, int64_t in) {
    for (auto [ab, rows, cols] : {std::tuple{"A", rank, in}, std::tuple{"B", o, rank}}) {
      store.emplace_back(size_t(rows * cols));
      for (float& x : store.back()) x = n(rng);
      tensors.push_back({store.back().data(), DType::F32, {rows, cols}});
      out.push_back({"base_model.model." + module + ".lora_" + ab + ".weight", &tensors.back(), DType::F32});
    }
  };
  const std::string layer = gpt2 ? "transformer.h.0." : "model.layers.0.";
  const std::string qkv = gpt2 ? "attn.c_attn" : "self_attn.v_proj";
  const std::string fc = gpt2 ? "mlp.c_fc" : "mlp.gate_proj";
  add(layer + qkv, 3, gpt2 ? 3 * c.dim : c.kv_dim(), c.dim);
  add(layer + fc, 2, c.hidden_dim, c.dim);
  const std::string dir = test::temp_dir() + "/foreign";
  fs::create_directories(dir);
  io::write_safetensors(dir + "/adapter_model.safetensors", out, {});
  nlohmann::json cfg = {{"peft_type", "LORA"},
                        {"r", 2},
                        {"lora_alpha", 4},
                        {"target_modules", {qkv, fc}},
                        {"rank_pattern", {{gpt2 ? "c_attn" : "v_proj", 3}}},
                        {"alpha_pattern", {{gpt2 ? "c_attn" : "v_proj", 9}}}};
  std::ofstream(dir + "/adapter_config.json") << cfg.dump();
  const LoraAdapter a = load_lora(dir, c);
  EXPECT_EQ(a.rank(), 3);
  const ModelWeights merged = merge_lora(w, a);
  // PEFT's merge, by hand: ΔW_qkv = 3·B·A (alpha 9 / r 3), ΔW_fc = 2·B·A (4 / 2).
  auto check = [&](const Tensor& W0, const Tensor& W1, const std::vector<float>& A, const std::vector<float>& B, int64_t r,
                   float s, int64_t row0, int64_t rows) {
    const int64_t in = W0.shape[1];
    double err = 0;
    for (int64_t o = 0; o < rows; o++)
      for (int64_t i = 0; i < in; i++) {
        double d = 0;
        for (int64_t k = 0; k < r; k++) d += double(B[size_t((row0 + o) * r + k)]) * A[size_t(k * in + i)];
        err = std::max(err, std::fabs(W0.f32()[o * in + i] + s * d - W1.f32()[o * in + i]));
      }
    EXPECT_LT(err, 1e-5);
  };
  const LayerWeights &l0 = w.layers[0], &l1 = merged.layers[0];
  if (gpt2) {
    check(l0.wq, l1.wq, store[0], store[1], 3, 3.0f, 0, c.dim);
    check(l0.wk, l1.wk, store[0], store[1], 3, 3.0f, c.dim, c.dim);
    check(l0.wv, l1.wv, store[0], store[1], 3, 3.0f, 2 * c.dim, c.dim);
  } else {
    check(l0.wv, l1.wv, store[0], store[1], 3, 3.0f, 0, c.kv_dim());
  }
  check(l0.w1, l1.w1, store[2], store[3], 2, 2.0f, 0, c.hidden_dim);
  // Layer 1 has no modules in the file: untouched.
  EXPECT_EQ(0, std::memcmp(w.layers[1].w1.data, merged.layers[1].w1.data, w.layers[1].w1.nbytes()));
}

INSTANTIATE_TEST_SUITE_P(Arch, lora_files, ::testing::Values(Arch::Llama, Arch::GPT2),
                         [](const auto& i) { return std::string(arch_name(i.param)); });

// Llama q/k: Hugging Face's rows are permuted (rotate-half RoPE). A q adapter written in the PEFT
// layout must merge, in HF's layout, into exactly HF's permutation of Orion's merged wq.
TEST(lora_files, LlamaPeftQAdapterFollowsHuggingFaceRowOrder) {
  const ModelConfig c = tiny(Arch::Llama);
  const LoraAdapter a = random_adapter(c, "q", 4, 4.0f, 41);
  const std::string dir = test::temp_dir() + "/perm";
  save_lora(a, dir, LoraFormat::Peft);
  io::SafetensorsFile st = io::SafetensorsFile::open(dir + "/adapter_model.safetensors");
  const io::SafetensorsEntry* b = st.find("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  ASSERT_TRUE(b);
  ModelWeights scratch;
  const Tensor orion_b{a.B(*a.find(0, LoraTarget::Q)), DType::F32, {c.dim, 4}};
  const Tensor want = io::hf_permute_rows(scratch, orion_b, c.n_heads);
  EXPECT_EQ(0, std::memcmp(b->data, want.data, b->nbytes));
  EXPECT_NE(0, std::memcmp(b->data, orion_b.data, b->nbytes)) << "the permutation must move rows";
}

// One malformed file per check: each error names the file and the field.
TEST(lora_files, MalformedFilesGiveClearErrors) {
  const ModelConfig c = tiny(Arch::Llama);
  const LoraAdapter a = random_adapter(c, "q,v", 4, 8.0f, 51);
  const std::string dir = test::temp_dir();
  auto expect_error = [&](const std::string& path, const std::string& what) {
    try {
      load_lora(path, c);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << "'" << e.what() << "' does not mention " << what;
    }
  };
  save_lora(a, dir + "/good.olora", LoraFormat::Orion);
  std::string bytes = read_text_file(dir + "/good.olora");
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir + "/" + name, std::ios::binary) << content;
    return dir + "/" + name;
  };
  expect_error(write("magic.olora", "NOTLORA!" + bytes.substr(8)), "magic");
  std::string v = bytes;
  v[8] = 9;
  expect_error(write("version.olora", v), "version");
  expect_error(write("short.olora", bytes.substr(0, bytes.size() - 10)), "size");
  std::string flip = bytes;
  flip[flip.size() - 3] ^= 0x40;
  expect_error(write("flip.olora", flip), "checksum");
  expect_error(write("tiny.olora", "ORIONLRA"), "version");
  // The adapter of another model.
  ModelConfig other = c;
  other.dim = 64, other.hidden_dim = 64;
  try {
    load_lora(dir + "/good.olora", other);
    ADD_FAILURE() << "an adapter for dim 32 loaded into dim 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[32, 32]"), std::string::npos) << e.what();
  }
  // PEFT: every broken piece.
  const std::string peft = dir + "/peft";
  save_lora(a, peft, LoraFormat::Peft);
  const std::string cfg_text = read_text_file(peft + "/adapter_config.json");
  auto with_cfg = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(cfg_text);
    edit(j);
    std::ofstream(peft + "/adapter_config.json") << j.dump();
  };
  with_cfg([](auto& j) { j["peft_type"] = "IA3"; });
  expect_error(peft, "peft_type");
  with_cfg([](auto& j) { j["use_dora"] = true; });
  expect_error(peft, "DoRA");
  with_cfg([](auto& j) { j["r"] = 8, j.erase("orion"); });
  expect_error(peft, "rank 4 in the tensors, 8 in the config");
  with_cfg([](auto& j) { j.erase("lora_alpha"); });
  expect_error(peft, "lora_alpha");
  std::ofstream(peft + "/adapter_config.json") << "{not json";
  expect_error(peft, "not valid JSON");
  with_cfg([](auto&) {});
  std::ofstream(peft + "/adapter_model.safetensors", std::ios::binary) << "garbage";
  expect_error(peft, "adapter_model.safetensors");
  fs::remove(peft + "/adapter_model.safetensors");
  expect_error(peft, "missing");
  // A GPT-2 adapter given to a Llama model: its tensor names do not fit.
  const ModelConfig g = tiny(Arch::GPT2);
  save_lora(random_adapter(g, "q,v", 4, 8.0f, 52), dir + "/gpt2peft", LoraFormat::Peft);
  expect_error(dir + "/gpt2peft", "unexpected tensor 'base_model.model.transformer.h.");
  expect_error(dir + "/nothing-here", "");
}

TEST(lora_files, TargetNamesAndUsageErrors) {
  EXPECT_EQ(parse_lora_targets("q_proj,v_proj", Arch::Llama), (std::vector<LoraTarget>{LoraTarget::Q, LoraTarget::V}));
  EXPECT_EQ(parse_lora_targets("v,q,q", Arch::Llama), (std::vector<LoraTarget>{LoraTarget::Q, LoraTarget::V}));
  EXPECT_EQ(parse_lora_targets("all", Arch::GPT2).size(), 6u);
  EXPECT_EQ(parse_lora_targets("all", Arch::Llama).size(), 7u);
  for (LoraTarget t : kAllLoraTargets)  // every canonical name parses back to its own target
    EXPECT_EQ(parse_lora_targets(lora_target_name(t), Arch::Llama), std::vector<LoraTarget>{t}) << lora_target_name(t);
  EXPECT_THROW(parse_lora_targets("q,x", Arch::Llama), Error);
  EXPECT_THROW(LoraAdapter(tiny(Arch::GPT2), 4, 8.0f, {LoraTarget::W3}), Error);
  EXPECT_THROW(LoraAdapter(tiny(Arch::Llama), 0, 8.0f, {LoraTarget::Q}), Error);
  EXPECT_THROW(LoraAdapter(tiny(Arch::Llama), 4, -1.0f, {LoraTarget::Q}), Error);
}

}  // namespace
}  // namespace orion
