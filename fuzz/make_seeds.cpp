// Writes the binary seed corpora of the fuzz targets: small valid files made by Orion's own
// writers (so a seed is always a file the reader accepts), one folder per target under <out>.
// Text seeds are committed in fuzz/corpus/<target>/; scripts/fuzz.sh passes both.
//   make_seeds <out> <repo>    (<repo>: for tests/testdata's IR graphs that become MIL programs)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/file.h"
#include "compiler/blob/blob_file.h"
#include "compiler/mil/emit_mil.h"
#include "data/token_files.h"
#include "ir/text.h"
#include "model/io/model_io.h"
#include "model/weights.h"
#include "support.h"
#include "train/loop/checkpoint.h"
#if __has_include("model/lora/lora_io.h")
#include "model/lora/lora_io.h"
#define ORION_HAVE_LORA 1
#endif

namespace fs = std::filesystem;
using namespace orion;

namespace {

std::string out_root;

std::string seed_path(const std::string& target, const std::string& name) {
  fs::create_directories(out_root + "/" + target);
  return out_root + "/" + target + "/" + name;
}

void put(const std::string& target, const std::string& name, std::string_view bytes) {
  std::ofstream(seed_path(target, name), std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string slurp(const std::string& path) { return read_text_file(path); }

std::string joined(std::string_view first, std::string_view second) {
  return std::string(first) + std::string(fuzz::kSplitMarker) + std::string(second);
}

ModelConfig tiny(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 8, c.hidden_dim = arch == Arch::GPT2 ? 32 : 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = arch == Arch::Llama ? 1 : 2;
  c.vocab_size = 16, c.padded_vocab = arch == Arch::GPT2 ? 20 : 16, c.seq_len = 8;
  c.tied_embeddings = arch == Arch::GPT2;
  return c;
}

void model_seeds() {
  std::string tmp = fuzz::scratch_dir();
  ModelWeights llama = random_weights(tiny(Arch::Llama), 1);
  ModelWeights gpt2 = random_weights(tiny(Arch::GPT2), 2);
  save_model(llama, seed_path("llama2c", "v0.bin"), ModelFormat::Llama2c);
  save_model(llama, seed_path("llama2c", "v1.bin"), ModelFormat::Llama2cV1);
  save_model(gpt2, seed_path("llmc", "v3.bin"), ModelFormat::LlmC);
  save_model(gpt2, seed_path("llmc", "v5_bf16.bin"), ModelFormat::LlmC, DType::BF16);
  save_model(llama, seed_path("gguf", "llama.gguf"), ModelFormat::Gguf);
  save_model(gpt2, seed_path("gguf", "gpt2_f16.gguf"), ModelFormat::Gguf, DType::F16);
  ModelConfig q8 = tiny(Arch::Llama);
  q8.dim = 32, q8.hidden_dim = 32;  // q8_0 rows are whole blocks of 32
  save_model(random_weights(q8, 3), seed_path("gguf", "llama_q8_0.gguf"), ModelFormat::Gguf, DType::Q8_0);
  // The Llama relatives' keys and tensors: q/k/v biases in Hugging Face's q/k order (qwen2), per-head
  // q/k norms and a head size of its own (qwen3), rope_freqs (Llama 3), a sliding window (Mistral).
  ModelConfig qwen2 = tiny(Arch::Qwen2), qwen3 = tiny(Arch::Qwen3), llama3 = tiny(Arch::Llama), mistral = tiny(Arch::Mistral);
  qwen3.head_size = 8;
  llama3.rope_scaling = {RopeScaling::Kind::Llama3, 8, 1, 4, 16};
  mistral.sliding_window = 4;
  save_model(random_weights(qwen2, 4), seed_path("gguf", "qwen2.gguf"), ModelFormat::Gguf);
  save_model(random_weights(qwen3, 5), seed_path("gguf", "qwen3_f16.gguf"), ModelFormat::Gguf, DType::F16);
  save_model(random_weights(llama3, 6), seed_path("gguf", "llama3.gguf"), ModelFormat::Gguf);
  save_model(random_weights(mistral, 7), seed_path("gguf", "mistral.gguf"), ModelFormat::Gguf);
  int i = 0;
  for (auto [w, dtype] : {std::pair{&llama, DType::F32}, {&llama, DType::F16}, {&gpt2, DType::BF16}}) {
    std::string dir = tmp + "/st" + std::to_string(i);
    save_model(*w, dir, ModelFormat::Safetensors, dtype);
    std::string config = slurp(dir + "/config.json");
    put("safetensors", "model" + std::to_string(i) + ".seed", joined(config, slurp(dir + "/model.safetensors")));
    put("hf_config", "config" + std::to_string(i) + ".json", config);
    i++;
  }
}

void checkpoint_and_data_seeds() {
  train::Params params(tiny(Arch::Llama));
  for (size_t k = 0; k < params.size(); k++) params.data()[k] = 0.01f * float(k % 7);
  train::AdamW opt(params);
  train::CheckpointState state;
  state.step = 3, state.adam_steps = 3, state.data_position = 12, state.rng_state = 99;
  train::write_checkpoint(seed_path("checkpoint", "llama.ckpt"), state, {{"lr", 0.001}, {"batch", 2}}, params, opt);

  std::vector<uint16_t> tokens = {1, 5, 9, 300, 2, 1, 7, 7, 42, 1, 3};
  data::write_token_file(seed_path("token_files", "shard.bin"), tokens, data::TokenFormat::Llama2c);
  std::vector<uint16_t> gpt = {50256, 15496, 11, 995, 50256, 464, 3797};
  data::write_token_file(seed_path("token_files", "train.bin"), gpt, data::TokenFormat::Llmc);
}

void blob_and_mil_seeds(const std::string& repo) {
  std::vector<uint8_t> f16(24, 0x3c), f32(32, 0x40), i4(5, 0x21);
  std::vector<compiler::blob::BlobIn> blobs = {{compiler::blob::BlobDType::F16, f16.data(), f16.size()},
                                               {compiler::blob::BlobDType::F32, f32.data(), f32.size()},
                                               {compiler::blob::BlobDType::I4, i4.data(), i4.size(), 4}};
  std::vector<uint8_t> image = compiler::blob::write_blob_file(blobs);
  put("blob", "three.bin", {reinterpret_cast<const char*>(image.data()), image.size()});
  std::vector<uint8_t> one = compiler::blob::write_blob_file({blobs[0]}, 128);
  put("blob", "aligned128.bin", {reinterpret_cast<const char*>(one.data()), one.size()});

  // Every small IR graph of the pass tests, emitted as MIL with its weights in one weight.bin.
  compiler::EmitOptions single;
  single.weight_files = compiler::EmitOptions::WeightFiles::Single;
  for (const auto& entry : fs::recursive_directory_iterator(repo + "/tests/testdata/compiler/passes")) {
    if (entry.path().extension() != ".ir" || entry.file_size() > 4096) continue;
    try {
      ir::Graph g = ir::parse_graph_file(entry.path().string());
      compiler::CompiledProgram p = compiler::emit_mil(g, compiler::default_chip(), single);
      auto it = p.weights.find("@model_path/weights/weight.bin");
      std::string blob = it == p.weights.end() ? "" : std::string(it->second.begin(), it->second.end());
      std::string name = entry.path().parent_path().filename().string() + "_" + entry.path().stem().string();
      put("mil", name + ".seed", blob.empty() ? p.mil_text : joined(blob, p.mil_text));
    } catch (const Error&) {
      // graphs the emitter refuses (the pass tests include illegal ones) make no MIL seed
    }
  }
}

void tokenizer_seeds(const std::string& repo) {
  std::string gpt2 = repo + "/tests/testdata/tokenizer/small_gpt2/";
  put("tokenizer_gpt2", "small.seed", joined(slurp(gpt2 + "vocab.json"), slurp(gpt2 + "merges.txt")));
}

void lora_seeds() {
#ifdef ORION_HAVE_LORA
  // The tiny Llama of fuzz_lora.cpp: an adapter on q and v, and one on every target.
  LoraAdapter qv(tiny(Arch::Llama), 2, 4.0f, {LoraTarget::Q, LoraTarget::V});
  qv.init(3);
  save_lora(qv, seed_path("lora", "qv.olora"), LoraFormat::Orion);
  LoraAdapter all(tiny(Arch::Llama), 1, 1.0f,
                  {LoraTarget::Q, LoraTarget::K, LoraTarget::V, LoraTarget::O, LoraTarget::W1, LoraTarget::W2, LoraTarget::W3});
  all.init(4);
  save_lora(all, seed_path("lora", "all.olora"), LoraFormat::Orion);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_seeds <out folder> <repo>\n");
    return 2;
  }
  out_root = argv[1];
  try {
    model_seeds();
    checkpoint_and_data_seeds();
    blob_and_mil_seeds(argv[2]);
    tokenizer_seeds(argv[2]);
    lora_seeds();
  } catch (const Error& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
