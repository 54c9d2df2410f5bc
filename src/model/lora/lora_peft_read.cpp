// Reading a Hugging Face PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) into a
// LoraAdapter — the layout and the choices are described in lora_io.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/json_error.h"
#include "model/family/family.h"
#include "model/io/io_internal.h"
#include "model/lora/lora_io.h"

namespace orion {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kHint = "Orion reads LoRA adapters saved by PEFT's save_pretrained (safetensors) for Llama and GPT-2 models";

// One adapted module of one layer: its LoRA matrices in fp32, PEFT orientation.
struct PeftModule {
  int layer = -1;
  std::string name;  // "self_attn.q_proj", "attn.c_attn", ...
  const io::SafetensorsEntry* a = nullptr;
  const io::SafetensorsEntry* b = nullptr;
  std::vector<float> A, B;  // A [R, in], B [out, R]
  int64_t R = 0, in = 0, out = 0;
  float scale = 0;  // alpha_m / R (or alpha_m / √R with rsLoRA)
};

// Targets a module adapts (several for a fused module: GPT-2's c_attn holds q, k and v).
std::vector<LoraTarget> module_targets(const PeftLayout& p, const std::string& m) {
  std::vector<LoraTarget> out;
  for (int t = 0; t < kLoraTargetCount; t++)
    if (p.module[t] && m == p.module[t]) out.push_back(LoraTarget(t));
  return out;
}

// The names of the adapter's tensors: base_model.model.<layer_prefix><i>.<module>.lora_<A|B>[.default].weight
std::regex peft_tensor_regex(const PeftLayout& p) {
  auto escaped = [](const std::string& s) { return std::regex_replace(s, std::regex(R"(\.)"), R"(\.)"); };
  std::string modules;
  for (int t = 0; t < kLoraTargetCount; t++)
    if (p.module[t]) modules += (modules.empty() ? "" : "|") + escaped(p.module[t]);
  return std::regex(R"(base_model\.model\.)" + escaped(p.layer_prefix) + R"((\d+)\.()" + modules +
                    R"()\.lora_([AB])(?:\.default)?\.weight)");
}

std::vector<float> read_f32(const io::SafetensorsEntry& e, const std::string& file) {
  if (!e.dtype)
    throw_input_error(file, fmt::format("tensor {} has dtype {}", e.name, e.dtype_name), e.name, int64_t(e.file_offset),
                      "LoRA tensors must be F32, F16 or BF16");
  std::vector<float> v(e.nbytes / dtype_size(*e.dtype));
  convert_dtype(e.data, *e.dtype, v.data(), DType::F32, v.size());
  size_t bad;
  if (!all_finite(v.data(), DType::F32, v.size(), &bad))
    throw_input_error(file, fmt::format("{}[{}] is not finite", e.name, bad), e.name, int64_t(e.file_offset),
                      "the adapter diverged");
  return v;
}

// PEFT's per-module pattern lookup: a key matches a module whose name is the key or ends in ".key".
const json* pattern_for(const json& cfg, const char* field, const std::string& module) {
  auto it = cfg.find(field);
  if (it == cfg.end() || !it->is_object()) return nullptr;
  for (auto p = it->begin(); p != it->end(); ++p)
    if (module == p.key() || module.ends_with("." + p.key())) return &p.value();
  return nullptr;
}

}  // namespace

LoraAdapter read_peft(const std::string& dir, const ModelConfig& base) {
  const std::string cfg_path = (fs::path(dir) / "adapter_config.json").string();
  const std::string st_path = (fs::path(dir) / "adapter_model.safetensors").string();
  json cfg = json::parse(read_text_file(cfg_path), nullptr, false);
  if (!cfg.is_object()) throw_input_error(cfg_path, "not valid JSON", "adapter_config", -1, kHint);
  auto field = [&](const char* key) -> const json& {
    auto it = cfg.find(key);
    if (it == cfg.end()) throw_input_error(cfg_path, "missing field", key, -1, kHint);
    return *it;
  };
  if (!field("peft_type").is_string() || field("peft_type").get<std::string>() != "LORA")
    throw_input_error(cfg_path, fmt::format("peft_type is {}, not \"LORA\"", field("peft_type").dump()), "peft_type", -1,
                      kHint);
  if (cfg.value("use_dora", false))
    throw_input_error(cfg_path, "DoRA adapters (use_dora) are not supported", "use_dora", -1,
                      "merge the adapter in PEFT first");
  if (cfg.contains("bias") && cfg["bias"] != "none")
    throw_input_error(cfg_path, fmt::format("bias {} is not supported (Orion trains no biases)", cfg["bias"].dump()), "bias",
                      -1, "save the adapter with bias=\"none\"");
  if (cfg.contains("modules_to_save") && !cfg["modules_to_save"].is_null() && !cfg["modules_to_save"].empty())
    throw_input_error(cfg_path, "modules_to_save (fully trained extra modules) is not supported", "modules_to_save", -1,
                      kHint);
  if (!field("r").is_number_integer() || field("r").get<int>() < 1)
    throw_input_error(cfg_path, fmt::format("r is {}", field("r").dump()), "r", -1, "r must be a positive integer");
  if (!field("lora_alpha").is_number() || !(field("lora_alpha").get<double>() > 0) ||
      !(field("lora_alpha").get<double>() <= double(std::numeric_limits<float>::max())))
    throw_input_error(cfg_path, fmt::format("lora_alpha is {}", field("lora_alpha").dump()), "lora_alpha", -1,
                      "a positive number");
  const bool rslora = cfg.value("use_rslora", false);
  if (!file_exists(st_path)) {
    const bool pickle = file_exists((fs::path(dir) / "adapter_model.bin").string());
    throw_input_error(st_path, "missing", "adapter_model.safetensors", -1,
                      pickle ? "adapter_model.bin (a PyTorch pickle) is not read; save with safe_serialization=True"
                             : kHint);
  }

  // Every tensor must be a lora_A / lora_B of a module Orion knows.
  const io::SafetensorsFile st = io::SafetensorsFile::open(st_path);
  const PeftLayout& layout = model_family(base.arch).peft();
  const std::regex re = peft_tensor_regex(layout);
  std::map<std::pair<int, std::string>, PeftModule> modules;
  for (const io::SafetensorsEntry& e : st.entries()) {
    std::smatch m;
    if (!std::regex_match(e.name, m, re))
      throw_input_error(st_path, fmt::format("unexpected tensor '{}' for a {} model", e.name, arch_name(base.arch)), e.name,
                        -1,
                        fmt::format("expected base_model.model.{}{{i}}.{}.lora_A.weight and the like", layout.layer_prefix,
                                    layout.module[int(LoraTarget::Q)]));
    const int layer = std::stoi(m[1].str());
    if (layer >= base.n_layers)
      throw_input_error(st_path, fmt::format("layer {} but the model has {}", layer, base.n_layers), e.name, -1,
                        "use the base model the adapter was trained on");
    PeftModule& pm = modules[{layer, m[2].str()}];
    pm.layer = layer, pm.name = m[2].str();
    (m[3] == "A" ? pm.a : pm.b) = &e;
  }
  if (modules.empty()) throw_input_error(st_path, "no LoRA tensors", "tensors", -1, kHint);

  // Shapes, ranks and scales per module.
  const float alpha = json_number<float>(cfg["lora_alpha"]);
  bool same_scale = true;
  int64_t R = 0;
  float s0 = -1;
  for (auto& [key, pm] : modules) {
    if (!pm.a || !pm.b)
      throw_input_error(st_path,
                        fmt::format("layer {} {} has lora_{} without lora_{}", pm.layer, pm.name, pm.a ? "A" : "B",
                                    pm.a ? "B" : "A"),
                        pm.name, -1, "the file is incomplete");
    const std::vector<LoraTarget> ts = module_targets(layout, pm.name);
    auto [out1, in] = lora_target_shape(base, ts[0]);
    const int64_t out = out1 * int64_t(ts.size());  // c_attn: 3C rows
    pm.R = pm.a->shape.empty() ? 0 : pm.a->shape[0], pm.in = in, pm.out = out;
    const std::vector<int64_t> wa = {pm.R, in}, wb = {out, pm.R};
    if (pm.R < 1 || pm.a->shape != wa || pm.b->shape != wb)
      throw_input_error(st_path,
                        fmt::format("lora_A {} and lora_B {} do not fit a [{}, {}] weight", json(pm.a->shape).dump(),
                                    json(pm.b->shape).dump(), out, in),
                        pm.a->name, -1, "use the base model the adapter was trained on");
    const json* rp = pattern_for(cfg, "rank_pattern", pm.name);
    const int64_t r_cfg = rp && rp->is_number_integer() ? rp->get<int64_t>() : cfg["r"].get<int64_t>();
    if (r_cfg != pm.R)
      throw_input_error(cfg_path, fmt::format("{} has rank {} in the tensors, {} in the config", pm.name, pm.R, r_cfg), "r",
                        -1, "the config and the tensors do not belong together");
    const json* ap = pattern_for(cfg, "alpha_pattern", pm.name);
    if (ap && ap->is_number() && !(std::fabs(ap->get<double>()) <= double(std::numeric_limits<float>::max())))
      throw_input_error(cfg_path, fmt::format("alpha_pattern of {} is {}", pm.name, ap->dump()), "alpha_pattern", -1,
                        "a number");
    const float am = ap && ap->is_number() ? json_number<float>(*ap) : alpha;
    pm.scale = rslora ? am / std::sqrt(float(pm.R)) : am / float(pm.R);
    pm.A = read_f32(*pm.a, st_path), pm.B = read_f32(*pm.b, st_path);
    R = std::max(R, pm.R);
    same_scale = same_scale && (s0 < 0 || pm.scale == s0);
    s0 = s0 < 0 ? pm.scale : s0;
  }

  // Orion's own split of GPT-2's c_attn into q, k, v adapters (written by save_lora), when it fits.
  const json orion = cfg.value("orion", json());
  const bool own = orion.is_object() && orion.value("format", 0) == 1 && orion.contains("targets") && !rslora;
  std::vector<LoraTarget> targets;
  int rank = int(R);
  float out_alpha = same_scale ? s0 * float(R) : float(R);  // scale alpha/R: the common one, or 1
  if (own) {
    std::string names;
    for (const json& t : orion["targets"]) names += (names.empty() ? "" : ",") + t.get<std::string>();
    targets = parse_lora_targets(names, base.arch);
    rank = orion.value("rank", 0), out_alpha = orion.value("alpha", 0.0f);
  } else {
    LoraTargetSet want;
    for (auto& [key, pm] : modules)
      for (LoraTarget t : module_targets(layout, pm.name)) want.add(t);
    targets = want.list();
  }
  LoraAdapter a(base, rank, out_alpha, targets);
  const float s_out = a.scale();
  for (auto& [key, pm] : modules) {
    const std::vector<LoraTarget> ts = module_targets(layout, pm.name);
    std::vector<LoraTarget> fused;  // with Orion's split: the adapted ones among q, k, v, in order
    for (LoraTarget t : targets)
      if (ts.size() > 1 && std::find(ts.begin(), ts.end(), t) != ts.end()) fused.push_back(t);
    for (size_t j = 0; j < ts.size(); j++) {
      const LoraTensor* lt = a.find(pm.layer, ts[j]);
      if (!lt) continue;
      const int64_t rows = lt->out;  // this target's block of B's rows
      int64_t col0 = 0, cols = pm.R;
      if (own && ts.size() > 1) {  // block j' of A's rows / B's columns
        const int64_t jj = std::find(fused.begin(), fused.end(), ts[j]) - fused.begin();
        col0 = jj * rank, cols = rank;
      }
      if (own && cols != rank)
        throw_input_error(cfg_path, "the orion record does not match the tensors", "orion", -1, kHint);
      if (col0 + cols > pm.R) throw_input_error(cfg_path, "the orion record does not match the tensors", "orion", -1, kHint);
      const float fold = own ? 1.0f : pm.scale / s_out;  // each module keeps its own scale
      float* A = a.A(*lt);
      float* B = a.B(*lt);
      std::memcpy(A, pm.A.data() + col0 * pm.in, size_t(cols * pm.in) * sizeof(float));  // rows col0.. of A
      std::vector<float> b(size_t(rows * a.rank()), 0.0f);
      for (int64_t o = 0; o < rows; o++)
        for (int64_t k = 0; k < cols; k++)
          b[size_t(o * a.rank() + k)] = pm.B[size_t((int64_t(j) * rows + o) * pm.R + col0 + k)] * fold;
      if (layout.permuted_qk && (ts[j] == LoraTarget::Q || ts[j] == LoraTarget::K)) {  // undo HF's q/k row permutation
        ModelWeights scratch;
        Tensor hf{b.data(), DType::F32, {rows, a.rank()}};
        Tensor un = io::hf_unpermute_rows(scratch, hf, ts[j] == LoraTarget::Q ? base.n_heads : base.n_kv_heads);
        std::memcpy(B, un.data, b.size() * sizeof(float));
      } else {
        std::memcpy(B, b.data(), b.size() * sizeof(float));
      }
    }
  }
  return a;
}

}  // namespace orion
