// Every format written and read back on tiny random models of both architectures, compared bit for
// bit (or after the documented dtype rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/file.h"
#include "model/io/io_internal.h"
#include "model/io/model_io.h"
#include "support.h"
#include "test_io_util.h"

namespace orion {
namespace {

using test::expect_same_weights;
using test::random_model;
using test::tiny_gpt2;
using test::tiny_llama;

ModelWeights round_trip(const ModelWeights& w, ModelFormat f, const std::string& name, std::optional<DType> dtype = {}) {
  std::string path = test::temp_dir() + "/" + name;
  save_model(w, path, f, dtype);
  EXPECT_EQ(detect_format(path), f == ModelFormat::Llama2cV1 ? ModelFormat::Llama2cV1 : f);
  return load_model(path);
}

TEST(ModelIo, Llama2cTiedRoundTrip) {
  ModelWeights w = random_model(tiny_llama(true), 1);
  ModelWeights r = round_trip(w, ModelFormat::Llama2c, "m.bin");
  EXPECT_EQ(r.config.describe(), w.config.describe());
  expect_same_weights(w, r);
  EXPECT_EQ(r.classifier.data, r.tok_emb.data);
}

TEST(ModelIo, Llama2cUntiedGqaRoundTrip) {
  ModelWeights w = random_model(tiny_llama(false), 2);
  ModelWeights r = round_trip(w, ModelFormat::Llama2c, "m.bin");
  EXPECT_FALSE(r.config.tied_embeddings);
  EXPECT_EQ(r.config.n_kv_heads, 2);
  expect_same_weights(w, r);
}

TEST(ModelIo, Llama2cLegacyLayoutHasHeaderAndRealRopeTables) {
  ModelConfig c = tiny_llama(false);
  ModelWeights w = random_model(c, 3);
  std::string path = test::temp_dir() + "/m.bin";
  save_model(w, path, ModelFormat::Llama2c);
  // Header: 7 int32, vocab negative for the unshared classifier.
  EXPECT_EQ(test::peek<int32_t>(path, 0), 64);
  EXPECT_EQ(test::peek<int32_t>(path, 16), 2);
  EXPECT_EQ(test::peek<int32_t>(path, 20), -300);
  // Size: header + all fp32 arrays including freq_cis_real/imag [T, HS/2] and wcls.
  const size_t C = 64, H = 160, L = 2, V = 300, T = 64, HS = 16, KV = 32;
  size_t floats =
      V * C + L * C + L * C * C + 2 * L * KV * C + L * C * C + L * C + 3 * L * C * H + C + 2 * T * HS / 2 + V * C;
  EXPECT_EQ(std::filesystem::file_size(path), 28 + 4 * floats);
  // The RoPE tables sit right after rms_final; check one entry of each: t = 5, i = 3.
  size_t freq_at = 28 + 4 * (V * C + L * C + L * C * C + 2 * L * KV * C + L * C * C + L * C + 3 * L * C * H + C);
  double angle = 5 * std::pow(10000.0, -2.0 * 3 / HS);
  EXPECT_NEAR(test::peek<float>(path, freq_at + 4 * (5 * HS / 2 + 3)), std::cos(angle), 1e-6);
  EXPECT_NEAR(test::peek<float>(path, freq_at + 4 * (T * HS / 2 + 5 * HS / 2 + 3)), std::sin(angle), 1e-6);
  // The first embedding value is the first float after the header: the data is in place.
  EXPECT_EQ(test::peek<float>(path, 28), w.tok_emb.f32()[0]);
  // The 28-byte header leaves every matrix 28 bytes past a 64-byte line, where each 64-byte load
  // of the f32 kernels would straddle two: they are copied onto lines (same bits), not used in place.
  ModelWeights r = load_model(path);
  for (const Tensor* t : {&r.tok_emb, &r.layers[0].wq, &r.layers[1].w3, &r.classifier})
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 64, 0u);
  expect_same_weights(w, r);
}

// A llama2.c version 1 file's 256-byte header leaves its matrices on 64-byte lines (with dims of
// multiples of 16): zero-copy, the loaded tensors point into one mapping, at their file offsets.
TEST(ModelIo, Llama2cV1MatricesAreViewsAtTheirOffsets) {
  ModelConfig c = tiny_llama(false);
  ModelWeights w = random_model(c, 3);
  std::string path = test::temp_dir() + "/m.bin";
  save_model(w, path, ModelFormat::Llama2cV1);
  const size_t C = size_t(c.dim), H = size_t(c.hidden_dim), L = size_t(c.n_layers), V = size_t(c.vocab_size),
               KV = size_t(c.kv_dim());
  ModelWeights r = load_model(path);
  auto offset = [&](const Tensor& t) { return static_cast<const char*>(t.data) - static_cast<const char*>(r.tok_emb.data); };
  // v1 order: the norms first (attention, ffn, final), then the embedding and the layers' matrices.
  EXPECT_EQ(offset(r.layers[0].wq), ptrdiff_t(4 * V * C));
  EXPECT_EQ(offset(r.layers[1].w3), ptrdiff_t(4 * (V * C + L * C * C + 2 * L * KV * C + L * C * C + 2 * L * C * H + C * H)));
  expect_same_weights(w, r);
}

// Where a file's bytes are used in place: f32 only from a 64-byte line (the kernels' 64-byte loads
// then never straddle two), f16 from its element; elsewhere a copy on a line with the same bits —
// and the memory copied from is left as it was (only a file mapping's pages are let go).
TEST(ModelIo, F32ViewsStartOnALineOtherDtypesOnTheirElement) {
  std::vector<uint8_t> buf(16384 + 64);
  uint8_t* line = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
  for (size_t i = 0; i < 16384; i++) line[i] = uint8_t(i * 7 + 1);
  ModelWeights w;
  const Tensor on_line = io::view_or_copy(w, line, DType::F32, {16, 16});
  EXPECT_EQ(on_line.data, line);
  const Tensor off_line = io::view_or_copy(w, line + 32, DType::F32, {48, 64});  // 12 KB: whole pages inside
  EXPECT_NE(off_line.data, static_cast<const void*>(line + 32));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(off_line.data) % 64, 0u);
  EXPECT_EQ(std::memcmp(off_line.data, line + 32, 48 * 64 * 4), 0);
  EXPECT_EQ(io::view_or_copy(w, line + 32, DType::F16, {16, 16}).data, line + 32);
  EXPECT_NE(io::view_or_copy(w, line + 33, DType::F16, {16, 16}).data, static_cast<const void*>(line + 33));
  for (size_t i = 0; i < 16384; i++) ASSERT_EQ(line[i], uint8_t(i * 7 + 1)) << "byte " << i;
}

// Orion's GGUF files put every tensor on a 64-byte line (general.alignment 64), so even f32
// matrices are used in place: each loaded matrix points into the mapping at its tensor's offset.
TEST(ModelIo, GgufWrittenByOrionKeepsF32MatricesInPlace) {
  ModelWeights w = random_model(tiny_llama(false), 21);
  const std::string path = test::temp_dir() + "/m.gguf";
  save_model(w, path, ModelFormat::Gguf, DType::F32);
  const io::GgufFile f = io::GgufFile::open(path, io::GgufArrays::Skip);
  ASSERT_NE(f.find_value("general.alignment"), nullptr);
  EXPECT_EQ(f.find_value("general.alignment")->value.get<uint64_t>(), 64u);
  for (const io::GgufTensor& t : f.tensors()) EXPECT_EQ(t.file_offset % 64, 0u) << t.name;
  ModelWeights r = load_model(path);
  auto at = [](const Tensor& t) { return static_cast<const char*>(t.data); };
  const ptrdiff_t wo = ptrdiff_t(f.find("blk.1.attn_output.weight")->file_offset);
  EXPECT_EQ(at(r.layers[1].wo) - at(r.layers[0].wo), wo - ptrdiff_t(f.find("blk.0.attn_output.weight")->file_offset));
  EXPECT_EQ(at(r.classifier) - at(r.layers[1].wo), ptrdiff_t(f.find("output.weight")->file_offset) - wo);
  expect_same_weights(w, r);
}

TEST(ModelIo, Llama2cWithoutRopeTablesIsAccepted) {
  ModelConfig c = tiny_llama(true);
  ModelWeights w = random_model(c, 4);
  std::string path = test::temp_dir() + "/m.bin";
  save_model(w, path, ModelFormat::Llama2c);
  // Cut the two [T, HS/2] tables out (they are the file's last bytes when the classifier is shared).
  std::string bytes = test::slurp(path);
  test::spit(path, bytes.substr(0, bytes.size() - 2 * 4 * 64 * 8));
  expect_same_weights(w, load_model(path));
}

TEST(ModelIo, Llama2cV1RoundTrip) {
  for (bool tied : {true, false}) {
    ModelWeights w = random_model(tiny_llama(tied), 5);
    ModelWeights r = round_trip(w, ModelFormat::Llama2cV1, "v1.bin");
    EXPECT_EQ(r.config.tied_embeddings, tied);
    expect_same_weights(w, r);
  }
}

TEST(ModelIo, Llama2cWritesF16ModelAsF32) {
  ModelWeights w = random_model(tiny_llama(), 6, DType::F16);
  ModelWeights r = round_trip(w, ModelFormat::Llama2c, "m.bin");
  EXPECT_EQ(r.matrix_dtype(), DType::F32);
  expect_same_weights(w, r);  // f16 → f32 is exact
}

TEST(ModelIo, SafetensorsLlamaEveryDtype) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (bool tied : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (tied ? " tied" : " untied"));
      ModelWeights w = random_model(tiny_llama(tied), 7, dt);
      ModelWeights r = round_trip(w, ModelFormat::Safetensors, "hf");
      EXPECT_EQ(r.matrix_dtype(), dt);
      EXPECT_EQ(r.layers[0].wv.dtype, dt);
      expect_same_weights(w, r);
    }
}

TEST(ModelIo, SafetensorsMatricesAreViewsAtTheirOffsets) {
  // v_proj, o_proj and the MLP need no rearranging, so they are views into the mapping: the distance
  // between two of them in memory equals the distance of their data_offsets in the file.
  for (DType dt : {DType::F32, DType::BF16}) {
    ModelWeights w = random_model(tiny_llama(false), 20, dt);
    std::string dir = test::temp_dir() + "/hf";
    save_model(w, dir, ModelFormat::Safetensors);
    std::string st = test::slurp(dir + "/model.safetensors");
    uint64_t n;
    std::memcpy(&n, st.data(), 8);
    auto h = nlohmann::json::parse(st.substr(8, n));
    auto begin = [&](const char* name) { return h[name]["data_offsets"][0].get<ptrdiff_t>(); };
    ModelWeights r = load_model(dir);
    auto at = [](const Tensor& t) { return static_cast<const char*>(t.data); };
    EXPECT_EQ(at(r.layers[1].wo) - at(r.layers[0].wv),
              begin("model.layers.1.self_attn.o_proj.weight") - begin("model.layers.0.self_attn.v_proj.weight"));
    EXPECT_EQ(at(r.classifier) - at(r.layers[1].w2), begin("lm_head.weight") - begin("model.layers.1.mlp.down_proj.weight"));
  }
}

TEST(ModelIo, SafetensorsGpt2EveryDtype) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    ModelWeights w = random_model(tiny_gpt2(300), 8, dt);
    ModelWeights r = round_trip(w, ModelFormat::Safetensors, "hf");
    EXPECT_EQ(r.config.arch, Arch::GPT2);
    EXPECT_EQ(r.matrix_dtype(), dt);
    expect_same_weights(w, r);
  }
}

TEST(ModelIo, SafetensorsConvertsDtypeOnWrite) {
  ModelWeights w = random_model(tiny_llama(false), 9);
  ModelWeights r = round_trip(w, ModelFormat::Safetensors, "hf", DType::BF16);
  EXPECT_EQ(r.matrix_dtype(), DType::BF16);
  expect_same_weights(w, r, DType::BF16, DType::F32);  // vectors are stored as f32
  ModelWeights g = random_model(tiny_gpt2(300), 10);
  expect_same_weights(g, round_trip(g, ModelFormat::Safetensors, "gpt2", DType::F16), DType::F16, DType::F32);
}

TEST(ModelIo, SafetensorsFilePathWritesConfigBeside) {
  ModelWeights w = random_model(tiny_llama(), 11);
  std::string dir = test::temp_dir(), path = dir + "/tiny.safetensors";
  save_model(w, path, ModelFormat::Safetensors);
  EXPECT_TRUE(file_exists(dir + "/config.json"));
  expect_same_weights(w, load_model(path));
  expect_same_weights(w, load_model(dir + "/config.json"));
}

TEST(ModelIo, SafetensorsConfigJsonHasTheFields) {
  ModelConfig c = tiny_llama(false);
  c.rope_theta = 500000.0f;
  c.norm_eps = 1e-6f;
  ModelWeights w = random_model(c, 12, DType::BF16);
  std::string dir = test::temp_dir() + "/hf";
  save_model(w, dir, ModelFormat::Safetensors);
  auto j = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["intermediate_size"], 160);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  EXPECT_DOUBLE_EQ(j["rope_theta"].get<double>(), 500000.0);
  EXPECT_DOUBLE_EQ(j["rms_norm_eps"].get<double>(), 1e-6);
  ModelWeights r = load_model(dir);
  EXPECT_EQ(r.config.rope_theta, 500000.0f);
  EXPECT_EQ(r.config.norm_eps, 1e-6f);
}

TEST(ModelIo, SafetensorsStoresHfNamesAndLayouts) {
  // GPT-2 Conv1D weights are [in, out]; Llama q_proj rows are permuted; v_proj is not.
  ModelWeights g = random_model(tiny_gpt2(300), 13);
  std::string dir = test::temp_dir() + "/g";
  save_model(g, dir, ModelFormat::Safetensors);
  std::string st = test::slurp(dir + "/model.safetensors");
  uint64_t n;
  std::memcpy(&n, st.data(), 8);
  auto h = nlohmann::json::parse(st.substr(8, n));
  EXPECT_EQ(h["transformer.h.0.attn.c_attn.weight"]["shape"], nlohmann::json({64, 192}));
  EXPECT_EQ(h["transformer.h.1.mlp.c_fc.weight"]["shape"], nlohmann::json({64, 256}));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  // c_attn[i][C + o] == wk[o][i]: the k block of the transposed weight.
  size_t begin = h["transformer.h.0.attn.c_attn.weight"]["data_offsets"][0];
  const float* c_attn = reinterpret_cast<const float*>(st.data() + 8 + n + begin);
  EXPECT_EQ(c_attn[5 * 192 + 64 + 7], g.layers[0].wk.f32()[7 * 64 + 5]);
  // Without the "transformer." prefix the reader finds them too.
  test::edit_safetensors(dir + "/model.safetensors", [](nlohmann::json& header, std::string&) {
    nlohmann::json renamed;
    for (auto& [k, v] : header.items()) renamed[k.rfind("transformer.", 0) == 0 ? k.substr(12) : k] = v;
    header = renamed;
  });
  expect_same_weights(g, load_model(dir));
}

TEST(ModelIo, LlmcRoundTripFp32AndBf16) {
  ModelWeights w = random_model(tiny_gpt2(320), 14);
  ModelWeights r = round_trip(w, ModelFormat::LlmC, "gpt2.bin");
  EXPECT_EQ(r.config.padded_vocab, 320);
  EXPECT_EQ(r.config.vocab_size, 300);
  expect_same_weights(w, r);
  // Zero-copy: q, k, v are consecutive row blocks of one qkvw tensor in the mapping.
  EXPECT_EQ(static_cast<const float*>(r.layers[1].wk.data), r.layers[1].wq.f32() + 64 * 64);
  ModelWeights b = round_trip(w, ModelFormat::LlmC, "gpt2_bf16.bin", DType::BF16);
  EXPECT_EQ(b.matrix_dtype(), DType::BF16);
  expect_same_weights(w, b, DType::BF16, DType::BF16);  // llm.c bf16 stores every parameter in bf16
}

TEST(ModelIo, LlmcToSafetensorsDropsPaddingAndBack) {
  ModelWeights w = random_model(tiny_gpt2(320), 15);
  std::string dir = test::temp_dir();
  save_model(w, dir + "/gpt2.bin", ModelFormat::LlmC);
  ModelWeights from_llmc = load_model(dir + "/gpt2.bin");
  save_model(from_llmc, dir + "/hf", ModelFormat::Safetensors);
  ModelWeights hf = load_model(dir + "/hf");
  EXPECT_EQ(hf.config.padded_vocab, 300);
  expect_same_weights(w, hf, DType::F32, DType::F32, 300);
  save_model(hf, dir + "/back.bin", ModelFormat::LlmC);
  expect_same_weights(hf, load_model(dir + "/back.bin"));
}

TEST(ModelIo, Llama2cToSafetensorsAndBackIsByteIdentical) {
  ModelWeights w = random_model(tiny_llama(false), 16);
  std::string dir = test::temp_dir();
  save_model(w, dir + "/a.bin", ModelFormat::Llama2c);
  save_model(load_model(dir + "/a.bin"), dir + "/hf", ModelFormat::Safetensors);
  save_model(load_model(dir + "/hf"), dir + "/b.bin", ModelFormat::Llama2c);
  EXPECT_EQ(test::slurp(dir + "/a.bin"), test::slurp(dir + "/b.bin"));
}

TEST(ModelIo, LoadOptionsConvertMatrices) {
  ModelWeights w = random_model(tiny_llama(), 17);
  std::string path = test::temp_dir() + "/m.bin";
  save_model(w, path, ModelFormat::Llama2c);
  LoadOptions o;
  o.dtype = DType::F16;
  ModelWeights r = load_model(path, o);
  EXPECT_EQ(r.layers[0].w2.dtype, DType::F16);
  EXPECT_EQ(r.layers[0].attn_norm.dtype, DType::F32);
  EXPECT_EQ(r.classifier.data, r.tok_emb.data);
  expect_same_weights(w, r, DType::F16, DType::F32);
}

TEST(ModelIo, RefusesImpossibleConversions) {
  std::string dir = test::temp_dir();
  auto expect_usage = [&](const ModelWeights& w, ModelFormat f, std::optional<DType> dt, const char* word) {
    test::spit(dir + "/keep.bin", "precious");
    try {
      save_model(w, dir + "/keep.bin", f, dt);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage) << e.what();
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
    EXPECT_EQ(test::slurp(dir + "/keep.bin"), "precious");  // nothing on disk was touched
  };
  ModelWeights g = random_model(tiny_gpt2(), 18), l = random_model(tiny_llama(), 19);
  expect_usage(g, ModelFormat::Llama2c, {}, "Llama-architecture");
  expect_usage(l, ModelFormat::LlmC, {}, "GPT-2");
  expect_usage(l, ModelFormat::Llama2c, DType::F16, "fp32");
  expect_usage(g, ModelFormat::LlmC, DType::F16, "bf16");
  l.config.rope_theta = 500000.0f;
  expect_usage(l, ModelFormat::Llama2cV1, {}, "rope_theta");
}

TEST(ModelIo, RefusesToWriteBrokenWeightsAndKeepsTheOldFile) {
  std::string path = test::temp_dir() + "/m.bin";
  ModelWeights good = random_model(tiny_llama(), 24);
  save_model(good, path, ModelFormat::Llama2c);
  const std::string before = test::slurp(path);
  ModelWeights bad = random_model(tiny_llama(), 25);
  float* p = static_cast<float*>(const_cast<void*>(bad.layers[1].w1.data));
  p[17] = std::nanf("");
  test::expect_input_error([&] { save_model(bad, path, ModelFormat::Llama2c); }, path, {"layers.1.w1", "NaN"});
  bad.layers[0].wk = Tensor{};
  test::expect_input_error([&] { save_model(bad, path, ModelFormat::Safetensors); }, path, {"layers.0.wk", "missing"});
  EXPECT_EQ(test::slurp(path), before);
}

TEST(ModelIo, FormatForOutputName) {
  EXPECT_EQ(format_for_output("x.safetensors", Arch::Llama), ModelFormat::Safetensors);
  EXPECT_EQ(format_for_output("out/hf", Arch::GPT2), ModelFormat::Safetensors);
  EXPECT_EQ(format_for_output("x.bin", Arch::Llama), ModelFormat::Llama2c);
  EXPECT_EQ(format_for_output("x.bin", Arch::GPT2), ModelFormat::LlmC);
  EXPECT_EQ(format_for_output("x.onnx", Arch::GPT2), std::nullopt);
  EXPECT_EQ(parse_format("llama2c-v1"), ModelFormat::Llama2cV1);
  EXPECT_EQ(parse_format("onnx"), std::nullopt);
}

}  // namespace
}  // namespace orion
