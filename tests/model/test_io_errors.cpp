// Malformed model files: every one must give a single Input error naming the file and the problem,
// never a crash.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/file.h"
#include "model/io/io_internal.h"
#include "model/io/model_io.h"
#include "support.h"
#include "test_io_util.h"

namespace orion {
namespace {

using nlohmann::json;
using test::expect_input_error;

std::string write_llama2c(bool tied = true, ModelFormat f = ModelFormat::Llama2c) {
  std::string path = test::temp_dir() + "/m.bin";
  save_model(test::random_model(test::tiny_llama(tied), 21), path, f);
  return path;
}

std::string write_llmc() {
  std::string path = test::temp_dir() + "/gpt2.bin";
  save_model(test::random_model(test::tiny_gpt2(), 22), path, ModelFormat::LlmC);
  return path;
}

std::string write_hf(ModelConfig c = test::tiny_llama(false), DType dt = DType::F32) {
  std::string dir = test::temp_dir() + "/hf";
  save_model(test::random_model(c, 23, dt), dir, ModelFormat::Safetensors);
  return dir;
}

void truncate_to(const std::string& path, size_t n) { std::filesystem::resize_file(path, n); }

// ---- llama2.c ----------------------------------------------------------------------------------

TEST(ModelIoErrors, Llama2cTruncated) {
  std::string p = write_llama2c();
  size_t size = std::filesystem::file_size(p);
  truncate_to(p, size - 100);
  expect_input_error([&] { load_model(p); }, p, {"needs", std::to_string(size), std::to_string(size - 100), "truncated"});
  truncate_to(p, 10);  // not even a whole header
  expect_input_error([&] { load_model(p); }, p, {"truncated"});
  truncate_to(p, 0);
  expect_input_error([&] { load_model(p); }, p, {});
}

TEST(ModelIoErrors, Llama2cHeaderDisagreesWithFileSize) {
  std::string p = write_llama2c();
  test::poke<int32_t>(p, 4, 192);  // hidden_dim 160 → 192
  expect_input_error([&] { load_model(p); }, p, {"header", "bytes", "the file has"});
}

TEST(ModelIoErrors, Llama2cNonsenseHeader) {
  std::string p = write_llama2c();
  test::poke<int32_t>(p, 12, 5);  // 5 heads do not divide dim 64
  expect_input_error([&] { load_model(p); }, p, {"n_heads"});
  test::poke<int32_t>(p, 0, -7);
  expect_input_error([&] { load_model(p); }, p, {"dim", "-7"});
}

TEST(ModelIoErrors, Llama2cNanAndInfWeights) {
  std::string p = write_llama2c();
  // The first float of layer 0's wq sits after the header, tok_emb [300, 64] and rms_att [2, 64].
  test::poke<float>(p, 28 + 4 * (300 * 64 + 2 * 64) + 4 * 3, std::nanf(""));
  expect_input_error([&] { load_model(p); }, p, {"layers.0.wq", "NaN or Inf", "element 3"});
  std::string q = write_llama2c();
  test::poke<float>(q, 28 + 4 * 10, INFINITY);
  expect_input_error([&] { load_model(q); }, q, {"tok_emb", "NaN or Inf"});
}

TEST(ModelIoErrors, Llama2cV1BadVersionAndTruncation) {
  std::string p = write_llama2c(false, ModelFormat::Llama2cV1);
  test::poke<int32_t>(p, 4, 2);
  expect_input_error([&] { load_model(p); }, p, {"version 2", "int8"});
  test::poke<int32_t>(p, 4, 1);
  truncate_to(p, std::filesystem::file_size(p) - 4);
  expect_input_error([&] { load_model(p); }, p, {"needs", "the file has"});
  truncate_to(p, 100);  // inside the 256-byte header
  expect_input_error([&] { load_model(p); }, p, {"header"});
}

// ---- llm.c ---------------------------------------------------------------------------------------

TEST(ModelIoErrors, LlmcBadMagic) {
  std::string p = write_llmc();
  test::poke<int32_t>(p, 0, 20240327);
  LoadOptions as_llmc;
  as_llmc.format = ModelFormat::LlmC;
  expect_input_error([&] { load_model(p, as_llmc); }, p, {"bad magic", "20240326"});
  // Detected from its content, the file is no longer llm.c: still one clear error naming it.
  expect_input_error([&] { load_model(p); }, p, {"20240327", "magic 20240326"});
}

TEST(ModelIoErrors, LlmcVersionTruncationAndDims) {
  std::string p = write_llmc();
  test::poke<int32_t>(p, 4, 4);
  expect_input_error([&] { load_model(p); }, p, {"version 4"});
  test::poke<int32_t>(p, 4, 3);
  test::poke<int32_t>(p, 24, 128);  // C = 64 → 128
  expect_input_error([&] { load_model(p); }, p, {"needs", "the file has"});
  test::poke<int32_t>(p, 24, 64);
  test::poke<int32_t>(p, 28, 200);  // Vp < V
  expect_input_error([&] { load_model(p); }, p, {"padded_vocab"});
  test::poke<int32_t>(p, 28, 320);
  truncate_to(p, std::filesystem::file_size(p) - 1);
  expect_input_error([&] { load_model(p); }, p, {"truncated"});
  truncate_to(p, 512);
  expect_input_error([&] { load_model(p); }, p, {"header", "truncated"});
}

TEST(ModelIoErrors, LlmcNan) {
  std::string p = write_llmc();
  // wpe starts after the header and wte [320, 64].
  test::poke<float>(p, 1024 + 4 * 320 * 64 + 4 * 9, std::nanf(""));
  expect_input_error([&] { load_model(p); }, p, {"pos_emb", "element 9"});
}

// ---- safetensors container ------------------------------------------------------------------------

std::string st_file(const std::string& dir) { return dir + "/model.safetensors"; }

TEST(ModelIoErrors, SafetensorsHeaderLengthPastEnd) {
  std::string d = write_hf(), f = st_file(d);
  test::poke<uint64_t>(f, 0, uint64_t(1) << 40);
  expect_input_error([&] { load_model(d); }, f, {"header length", "does not fit"});
  truncate_to(f, 5);
  expect_input_error([&] { load_model(d); }, f, {"truncated"});
}

TEST(ModelIoErrors, SafetensorsBrokenJson) {
  std::string d = write_hf(), f = st_file(d);
  test::poke<char>(f, 8, '[');  // the header now starts "[\"..."
  std::string s = test::slurp(f);
  s[9] = '}';
  test::spit(f, s);
  expect_input_error([&] { load_model(d); }, f, {"not valid JSON"});
}

TEST(ModelIoErrors, SafetensorsUnsupportedDtypeIsNamed) {
  std::string d = write_hf(), f = st_file(d);
  test::edit_safetensors(f, [](json& h, std::string&) {
    // Same byte count: 16 F32 values read as 8 I64.
    auto& e = h["model.norm.weight"];
    e["dtype"] = "I64";
    e["shape"] = {32};
  });
  expect_input_error([&] { load_model(d); }, f, {"I64", "not supported", "model.norm.weight"});
  test::edit_safetensors(f, [](json& h, std::string&) { h["model.norm.weight"]["dtype"] = "Q4_K"; });
  expect_input_error([&] { load_model(d); }, f, {"unknown dtype", "Q4_K"});
}

TEST(ModelIoErrors, SafetensorsShapeDisagreesWithOffsets) {
  std::string d = write_hf(), f = st_file(d);
  test::edit_safetensors(f, [](json& h, std::string&) { h["model.norm.weight"]["shape"] = {65}; });
  expect_input_error([&] { load_model(d); }, f, {"model.norm.weight", "needs 260 bytes"});
}

TEST(ModelIoErrors, SafetensorsOffsetsOutOfRange) {
  std::string d = write_hf(), f = st_file(d);
  test::edit_safetensors(f, [](json& h, std::string& data) {
    auto& off = h["model.norm.weight"]["data_offsets"];
    size_t n = off[1].get<size_t>() - off[0].get<size_t>();
    off = {data.size() - n + 64, data.size() + 64};
  });
  expect_input_error([&] { load_model(d); }, f, {"model.norm.weight", "past the end"});
  test::edit_safetensors(f, [](json& h, std::string&) { h["model.norm.weight"]["data_offsets"] = {100, 50}; });
  expect_input_error([&] { load_model(d); }, f, {"end before they begin"});
}

TEST(ModelIoErrors, SafetensorsOverlappingTensors) {
  std::string d = write_hf(), f = st_file(d);
  test::edit_safetensors(f, [](json& h, std::string&) {
    // Point one norm at the bytes of another of the same size.
    h["model.layers.1.input_layernorm.weight"]["data_offsets"] = h["model.layers.0.input_layernorm.weight"]["data_offsets"];
  });
  expect_input_error([&] { load_model(d); }, f, {"overlaps", "input_layernorm"});
}

TEST(ModelIoErrors, SafetensorsMissingTensorAndWrongShape) {
  std::string d = write_hf(), f = st_file(d);
  test::edit_safetensors(f, [](json& h, std::string&) { h.erase("lm_head.weight"); });
  expect_input_error([&] { load_model(d); }, f, {"lm_head.weight", "missing"});
  std::string d2 = write_hf(test::tiny_gpt2(300)), f2 = st_file(d2);
  test::edit_safetensors(f2, [](json& h, std::string&) {
    auto& e = h["transformer.h.1.mlp.c_fc.weight"];
    e["shape"] = {256, 64};  // stored [out, in] instead of Conv1D's [in, out]
  });
  expect_input_error([&] { load_model(d2); }, f2, {"c_fc.weight", "config.json implies [64, 256]"});
}

TEST(ModelIoErrors, SafetensorsInfF16Weights) {
  std::string d = write_hf(test::tiny_llama(true), DType::F16), f = st_file(d);
  size_t at = 0, len = 0;
  test::edit_safetensors(f, [&](json& h, std::string& data) {
    at = h["model.layers.1.mlp.down_proj.weight"]["data_offsets"][0];
    uint16_t inf = 0x7c00;
    std::memcpy(&data[at + 2 * 11], &inf, 2);
    len = data.size();
  });
  expect_input_error([&] { load_model(d); }, d, {"layers.1.w2", "NaN or Inf", "element 11"});
}

// ---- config.json -------------------------------------------------------------------------------------

void edit_config(const std::string& dir, const std::function<void(json&)>& edit) {
  json j = json::parse(read_text_file(dir + "/config.json"));
  edit(j);
  test::spit(dir + "/config.json", j.dump());
}

TEST(ModelIoErrors, ConfigJsonMissing) {
  std::string d = write_hf();
  std::filesystem::remove(d + "/config.json");
  expect_input_error([&] { load_model(d); }, d + "/config.json", {"missing"});
}

TEST(ModelIoErrors, ConfigJsonMissingOrZeroFields) {
  std::string d = write_hf();
  edit_config(d, [](json& j) { j.erase("hidden_size"); });
  expect_input_error([&] { load_model(d); }, d + "/config.json", {"hidden_size", "missing"});
  std::string d2 = write_hf();
  edit_config(d2, [](json& j) { j["num_hidden_layers"] = 0; });
  expect_input_error([&] { load_model(d2); }, d2 + "/config.json", {"num_hidden_layers", "positive"});
  std::string d3 = write_hf(test::tiny_gpt2(300));
  edit_config(d3, [](json& j) { j["n_head"] = "four"; });
  expect_input_error([&] { load_model(d3); }, d3 + "/config.json", {"n_head", "integer"});
  std::string d4 = write_hf();
  edit_config(d4, [](json& j) { j["num_key_value_heads"] = 3; });  // does not divide 4 heads
  expect_input_error([&] { load_model(d4); }, d4 + "/config.json", {"n_kv_heads"});
}

TEST(ModelIoErrors, ConfigJsonUnsupportedOrBroken) {
  std::string d = write_hf();
  edit_config(d, [](json& j) { j["model_type"] = "mamba"; });
  expect_input_error([&] { load_model(d); }, d + "/config.json", {"model_type", "mamba"});
  edit_config(d, [](json& j) {
    j["model_type"] = "llama";
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  });
  expect_input_error([&] { load_model(d); }, d + "/config.json", {"rope_scaling"});
  test::spit(d + "/config.json", "{\"model_type\": \"llama\", ");
  expect_input_error([&] { load_model(d); }, d + "/config.json", {"not valid JSON"});
  // A number JSON cannot hold is nlohmann's out_of_range, not a parse_error (found by fuzz_hf_config).
  test::spit(d + "/config.json", "{\"model_type\": \"llama\", \"hidden_size\": 1e7777}");
  expect_input_error([&] { load_model(d); }, d + "/config.json", {"not valid JSON", "number overflow"});
  // config.json and weights of different models.
  std::string d2 = write_hf();
  edit_config(d2, [](json& j) { j["intermediate_size"] = 128; });
  expect_input_error([&] { load_model(d2); }, st_file(d2), {"gate_proj", "config.json implies"});
}

TEST(ModelIoErrors, MissingFileAndEmptyFolder) {
  std::string dir = test::temp_dir();
  expect_input_error([&] { load_model(dir + "/nope.bin"); }, dir + "/nope.bin", {"cannot open"});
  expect_input_error([&] { load_model(dir); }, dir, {"no model.safetensors"});
}

}  // namespace
}  // namespace orion
