// LoRA adapter files (format descriptions in lora_io.h).
#include "model/lora/lora_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iterator>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "model/family/family.h"
#include "model/io/io_internal.h"

namespace orion {
namespace fs = std::filesystem;

uint64_t lora_file_checksum(const uint8_t* p, size_t n) {  // FNV-1a over 8-byte words, then the tail
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'O', 'R', 'I', 'O', 'N', 'L', 'R', 'A'};
constexpr uint32_t kVersion = 1;
constexpr const char* kPeftConfig = "adapter_config.json";
constexpr const char* kPeftTensors = "adapter_model.safetensors";
constexpr const char* kOrionFile = "adapter.olora";

// ---- Orion's format --------------------------------------------------------------------------------

// The base dimensions that size the adapter's matrices; head_size only when the config gives one
// (Qwen3: NH·HS ≠ C), so the files of the other models are as before.
json base_json(const ModelConfig& c) {
  json j = {{"arch", arch_name(c.arch)}, {"dim", c.dim},         {"hidden_dim", c.hidden_dim},
            {"n_layers", c.n_layers},    {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads}};
  if (c.head_size > 0) j["head_size"] = c.head_size;
  return j;
}

template <typename T>
T get_field(const json& j, const char* key, const std::string& file, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw_input_error(file, "missing field", where + key, -1, "the adapter header is incomplete");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw_input_error(file, fmt::format("wrong type: {}", it->dump()), where + key);
  }
}

void write_orion(const LoraAdapter& a, const std::string& path, const LoraTrainingState* training = nullptr) {
  json tensors = json::array();
  for (const LoraTensor& t : a.tensors()) {
    std::string n = fmt::format("layers.{}.{}", t.layer, lora_target_name(t.target));
    tensors.push_back({{"name", n + ".A"}, {"shape", {a.rank(), t.in}}, {"offset", t.a_offset}});
    tensors.push_back({{"name", n + ".B"}, {"shape", {t.out, a.rank()}}, {"offset", t.b_offset}});
  }
  json targets = json::array();
  for (LoraTarget t : a.targets()) targets.push_back(lora_target_name(t));
  json h = {{"base", base_json(a.base_config())},
            {"rank", a.rank()},
            {"alpha", a.alpha()},
            {"targets", targets},
            {"tensors", tensors}};
  if (training) {
    ORION_CHECK(training->m.size() == a.size() && training->v.size() == a.size(),
                "LoRA checkpoint: moments of another layout");
    h["training"] = training->json;
  }
  const std::string header = h.dump();
  // The body (header, padding, floats) is hashed before anything is written.
  std::vector<uint8_t> body(header.begin(), header.end());
  body.resize((32 + body.size() + 63) / 64 * 64 - 32, 0);
  const size_t floats_at = body.size(), n = a.size() * sizeof(float);
  body.resize(floats_at + n * (training ? 3 : 1));
  std::memcpy(body.data() + floats_at, a.data(), n);
  if (training) {
    std::memcpy(body.data() + floats_at + n, training->m.data(), n);
    std::memcpy(body.data() + floats_at + 2 * n, training->v.data(), n);
  }
  write_file_atomic(path, [&](FileWriter& w) {
    w.write(kMagic, 8);
    w.write_pod(kVersion);
    w.write_pod(uint32_t(header.size()));
    w.write_pod(uint64_t(a.size()));
    w.write_pod(lora_file_checksum(body.data(), body.size()));
    w.write(body.data(), body.size());
  });
}

// An adapter.olora already in memory (`path` names it in errors).
LoraAdapter parse_orion(const uint8_t* data, size_t size, const std::string& path, LoraTrainingState* training) {
  ByteReader r(data, size, path);
  const uint8_t* magic = r.bytes(8, "magic");
  if (std::memcmp(magic, kMagic, 8) != 0)
    throw_input_error(path, "not an Orion LoRA adapter", "magic", 0,
                      "give an adapter.olora written by `orion lora train`, or a PEFT folder with adapter_config.json");
  const uint32_t version = r.read<uint32_t>("version");
  if (version != kVersion)
    throw_input_error(path, fmt::format("version {} (this Orion reads version {})", version, kVersion), "version", 8,
                      "write the adapter again with this Orion version");
  const uint32_t J = r.read<uint32_t>("header_bytes");
  const uint64_t N = r.read<uint64_t>("n_floats");
  const uint64_t sum = r.read<uint64_t>("checksum");
  const uint8_t* hp = r.bytes(J, "header");
  const size_t floats_at = (32 + size_t(J) + 63) / 64 * 64;
  json j = json::parse(hp, hp + J, nullptr, false);
  if (!j.is_object()) throw_input_error(path, "the JSON header does not parse", "header", 32);
  const bool has_moments = j.contains("training");  // a training checkpoint: AdamW's m and v follow
  const size_t want = floats_at + N * sizeof(float) * (has_moments ? 3 : 1);
  if (N > (size / sizeof(float)) || want != size)
    throw_input_error(path, fmt::format("the file has {} bytes; its header says {}", size, want), "size", -1,
                      "the file is truncated or damaged");
  if (lora_file_checksum(data + 32, size - 32) != sum)
    throw_input_error(path, "the checksum does not match the contents", "checksum", 24,
                      "the file is damaged; write it again");
  const json base = get_field<json>(j, "base", path, "");
  ModelConfig c;
  const std::string arch = get_field<std::string>(base, "arch", path, "base.");
  const ModelFamily* family = find_model_family(arch);
  if (!family) throw_input_error(path, fmt::format("unknown architecture '{}'", arch), "base.arch");
  c.arch = family->id();
  c.dim = get_field<int>(base, "dim", path, "base.");
  c.hidden_dim = get_field<int>(base, "hidden_dim", path, "base.");
  c.n_layers = get_field<int>(base, "n_layers", path, "base.");
  c.n_heads = get_field<int>(base, "n_heads", path, "base.");
  c.n_kv_heads = get_field<int>(base, "n_kv_heads", path, "base.");
  if (base.contains("head_size")) c.head_size = get_field<int>(base, "head_size", path, "base.");
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_size < 0 ||
      (c.head_size == 0 && c.dim % c.n_heads))
    throw_input_error(path, "the base dimensions are not a valid model", "base");
  std::string names;
  for (const json& t : get_field<json>(j, "targets", path, ""))
    names += (names.empty() ? "" : ",") + (t.is_string() ? t.get<std::string>() : std::string("?"));
  std::vector<LoraTarget> targets;
  try {
    targets = parse_lora_targets(names, c.arch);
    LoraAdapter a(c, get_field<int>(j, "rank", path, ""), get_field<float>(j, "alpha", path, ""), targets);
    if (a.size() != N)
      throw_input_error(path, fmt::format("{} floats for rank {} on {}; the file has {}", a.size(), a.rank(), names, N),
                        "n_floats", 16, "the file is damaged");
    std::memcpy(a.data(), data + floats_at, N * sizeof(float));
    size_t bad;
    if (!all_finite(a.data(), DType::F32, a.size(), &bad))
      throw_input_error(path, fmt::format("float {} of the adapter is not finite", bad), "data",
                        int64_t(floats_at + bad * 4), "the adapter was saved from a diverged run");
    if (training) {
      if (!has_moments)
        throw_input_error(path, "not a training checkpoint (no optimiser state)", "training", -1,
                          "resume from a checkpoint in the run's checkpoints/ folder");
      training->json = j["training"];
      const float* moments = reinterpret_cast<const float*>(data + floats_at) + N;
      training->m.assign(moments, moments + N);
      training->v.assign(moments + N, moments + 2 * N);
    }
    return a;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Input) throw;
    throw_input_error(path, e.what(), "header");
  }
}

LoraAdapter read_orion(const std::string& path, LoraTrainingState* training = nullptr) {
  auto f = MappedFile::open(path);
  return parse_orion(f->data(), f->size(), path, training);
}

// ---- PEFT ------------------------------------------------------------------------------------------

// The PEFT module (under base_model.model.) that adapts a target of layer i.
std::string peft_module(const PeftLayout& p, int i, LoraTarget t) {
  return fmt::format("{}{}.{}", p.layer_prefix, i, p.module[int(t)]);
}
// True when q, k and v are one fused module (GPT-2's c_attn).
bool fused_qkv(const PeftLayout& p) { return std::string(p.module[int(LoraTarget::Q)]) == p.module[int(LoraTarget::K)]; }
bool is_qkv(LoraTarget t) { return t == LoraTarget::Q || t == LoraTarget::K || t == LoraTarget::V; }

// A matrix owned by a std::vector, as a Tensor for the safetensors writer.
struct OwnedMatrix {
  std::vector<float> v;
  Tensor t;
  OwnedMatrix(int64_t rows, int64_t cols) : v(size_t(rows * cols), 0.0f) { t = {v.data(), DType::F32, {rows, cols}}; }
};

void write_peft(const LoraAdapter& a, const std::string& dir, const std::string& base_name) {
  const ModelConfig& c = a.base_config();
  const int r = a.rank();
  const PeftLayout& layout = model_family(c.arch).peft();
  const bool fused = fused_qkv(layout);
  std::vector<LoraTarget> qkv;  // a fused q/k/v module: the adapted ones among q, k, v, in order
  for (LoraTarget t : a.targets())
    if (fused && is_qkv(t)) qkv.push_back(t);
  const int m = int(qkv.size());
  std::vector<std::unique_ptr<OwnedMatrix>> keep;
  std::vector<io::SafetensorsOut> out;
  ModelWeights scratch;  // owns the permuted copies
  auto add = [&](const std::string& module, const Tensor* A, const Tensor* B) {
    out.push_back({"base_model.model." + module + ".lora_A.weight", A, DType::F32});
    out.push_back({"base_model.model." + module + ".lora_B.weight", B, DType::F32});
  };
  std::deque<Tensor> views;  // stable addresses for the pointers in `out`
  for (int l = 0; l < c.n_layers; l++) {
    if (m > 0) {  // A = [A_q; A_k; A_v] (adapted ones), B [3C, m·r] block-diagonal
      const int64_t C = c.dim;
      auto A = std::make_unique<OwnedMatrix>(int64_t(m) * r, C);
      auto B = std::make_unique<OwnedMatrix>(3 * C, int64_t(m) * r);
      for (int j = 0; j < m; j++) {
        const LoraTensor* t = a.find(l, qkv[size_t(j)]);
        std::memcpy(A->v.data() + size_t(j) * r * C, a.A(*t), size_t(r * C) * sizeof(float));
        const int64_t row0 = int64_t(qkv[size_t(j)]) * C;  // q rows 0..C, k C..2C, v 2C..3C
        for (int64_t o = 0; o < C; o++)
          for (int k = 0; k < r; k++) B->v[size_t((row0 + o) * m * r + j * r + k)] = a.B(*t)[o * r + k];
      }
      add(peft_module(layout, l, LoraTarget::Q), &A->t, &B->t);
      keep.push_back(std::move(A)), keep.push_back(std::move(B));
    }
    for (LoraTarget tg : a.targets()) {
      if (fused && is_qkv(tg)) continue;
      const LoraTensor* t = a.find(l, tg);
      views.push_back({a.A(*t), DType::F32, {r, t->in}});
      const Tensor* A = &views.back();
      views.push_back({a.B(*t), DType::F32, {t->out, r}});
      const Tensor* B = &views.back();
      if (layout.permuted_qk && (tg == LoraTarget::Q || tg == LoraTarget::K)) {  // HF's permuted q/k rows (io_internal.h)
        views.push_back(io::hf_permute_rows(scratch, *B, tg == LoraTarget::Q ? c.n_heads : c.n_kv_heads));
        B = &views.back();
      }
      add(peft_module(layout, l, tg), A, B);
    }
  }
  json modules = json::array(), split = json::array();
  for (LoraTarget t : a.targets()) {
    std::string name = layout.target_module[int(t)];
    if (std::find(modules.begin(), modules.end(), name) == modules.end()) modules.push_back(name);
    split.push_back(lora_target_name(t));
  }
  json cfg = {{"peft_type", "LORA"},
              {"task_type", "CAUSAL_LM"},
              {"base_model_name_or_path", base_name},
              {"r", r},
              {"lora_alpha", a.alpha()},
              {"lora_dropout", 0.0},
              {"target_modules", modules},
              {"bias", "none"},
              {"fan_in_fan_out", layout.fan_in_fan_out},
              {"inference_mode", true},
              {"use_rslora", false},
              {"use_dora", false},
              {"modules_to_save", nullptr},
              {"rank_pattern", json::object()},
              {"alpha_pattern", json::object()},
              {"orion", {{"format", 1}, {"rank", r}, {"alpha", a.alpha()}, {"targets", split}}}};
  if (m > 1) cfg["rank_pattern"]["c_attn"] = m * r, cfg["alpha_pattern"]["c_attn"] = float(m) * a.alpha();
  fs::create_directories(dir);
  io::write_safetensors((fs::path(dir) / kPeftTensors).string(), out, {{"format", "pt"}});
  const std::string text = cfg.dump(2) + "\n";
  write_file_atomic((fs::path(dir) / kPeftConfig).string(), [&](FileWriter& w) { w.write_str(text); });
}

}  // namespace

std::string lora_file_name(LoraFormat f) { return f == LoraFormat::Orion ? kOrionFile : kPeftTensors; }

void save_lora(const LoraAdapter& a, const std::string& path, LoraFormat format, const std::string& base_model_name) {
  if (format == LoraFormat::Orion) {
    if (path.ends_with(".olora")) return write_orion(a, path);
    fs::create_directories(path);
    return write_orion(a, (fs::path(path) / kOrionFile).string());
  }
  write_peft(a, path, base_model_name);
}

void save_lora_checkpoint(const LoraAdapter& a, const std::string& path, const LoraTrainingState& training) {
  write_orion(a, path, &training);
}

LoraAdapter read_lora_checkpoint(const std::string& path, LoraTrainingState* training) { return read_orion(path, training); }
LoraAdapter parse_lora_checkpoint(const uint8_t* data, size_t size, const std::string& name, LoraTrainingState* training) {
  return parse_orion(data, size, name, training);
}

LoraAdapter read_peft(const std::string& dir, const ModelConfig& base);  // lora_peft_read.cpp

LoraAdapter load_lora(const std::string& path, const ModelConfig& base) {
  LoraAdapter a;
  std::string source = path;
  if (is_directory(path)) {
    const fs::path own = fs::path(path) / kOrionFile;
    if (file_exists(own.string())) source = own.string(), a = read_orion(source);
    else if (file_exists((fs::path(path) / kPeftConfig).string())) a = read_peft(path, base);
    else
      throw_input_error(path, fmt::format("the folder holds neither {} nor {}", kOrionFile, kPeftConfig), "adapter", -1,
                        "give a folder written by `orion lora train` or PEFT's save_pretrained");
  } else {
    const std::string name = fs::path(path).filename().string();
    if (name == kPeftTensors || name == kPeftConfig) a = read_peft(fs::path(path).parent_path().string(), base);
    else a = read_orion(path);
  }
  a.check_fits(base, source);
  return a;
}

}  // namespace orion
