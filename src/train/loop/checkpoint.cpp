#include "train/loop/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "base/file.h"
#include "base/json_error.h"
#include "model/family/family.h"

namespace orion::train {
namespace fs = std::filesystem;

namespace {

constexpr size_t kFixedHeader = 32;
const char* kMagicHint =
    "not an Orion checkpoint: --resume takes a run folder, its checkpoints/ folder or a ckpt_*.ckpt file "
    "written by `orion train`";

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

nlohmann::json state_to_json(const CheckpointState& s) {
  nlohmann::json j = {{"step", s.step},
          {"adam_steps", s.adam_steps},
          {"data_position", s.data_position},
          {"rng_state", s.rng_state},
          {"skipped_steps", s.skipped_steps},
          {"tokenizer", s.tokenizer},
          {"tokenizer_hash", s.tokenizer_hash}};
  if (s.loss_scale > 0) j["loss_scale"] = s.loss_scale, j["loss_scale_clean_steps"] = s.loss_scale_clean_steps;
  return j;
}

// Reads j[key] as T; a missing or mistyped field is an Input error naming it.
template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& file, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw_input_error(file, "missing field", where + "." + key, -1, "the checkpoint header is incomplete");
  try {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) return json_number<T>(*it);
    else return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_input_error(file, fmt::format("wrong type: {}", it->dump()), where + "." + key);
  }
}

CheckpointState state_from_json(const nlohmann::json& j, const std::string& file) {
  CheckpointState s;
  s.step = field<int64_t>(j, "step", file, "state");
  s.adam_steps = field<int64_t>(j, "adam_steps", file, "state");
  s.data_position = field<uint64_t>(j, "data_position", file, "state");
  s.rng_state = field<uint64_t>(j, "rng_state", file, "state");
  s.skipped_steps = field<int64_t>(j, "skipped_steps", file, "state");
  s.tokenizer = field<std::string>(j, "tokenizer", file, "state");
  s.tokenizer_hash = field<uint64_t>(j, "tokenizer_hash", file, "state");
  if (j.contains("loss_scale")) {
    s.loss_scale = field<float>(j, "loss_scale", file, "state");
    s.loss_scale_clean_steps = field<int>(j, "loss_scale_clean_steps", file, "state");
  }
  if (s.step < 0 || s.adam_steps < 0 || s.adam_steps > s.step)
    throw_input_error(file, fmt::format("step {} and adam_steps {} are inconsistent", s.step, s.adam_steps), "state.step");
  return s;
}

// The first non-finite parameter, named by its tensor: a checkpoint must never hold one.
void check_finite(const Params& p, const std::string& file) {
  for (const ParamInfo& t : p.tensors()) {
    const float* x = p.data() + t.offset;
    for (size_t i = 0; i < t.numel; ++i)
      if (!std::isfinite(x[i]))
        throw_input_error(file, fmt::format("{}[{}] is {}", t.name, i, x[i]), "params", -1,
                          "the checkpoint holds a non-finite weight; resume from an older one");
  }
}

}  // namespace

uint64_t checkpoint_hash(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;  // spread the high bits down: a plain word FNV mixes upwards only
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t hash_file(const std::string& path) {
  auto f = MappedFile::open(path);
  return checkpoint_hash(f->data(), f->size());
}

// The block options of Llama's relatives (head_size, rope_scaling, sliding_window) only when a
// config has them, so a plain model's record (and its hash) is as before.
nlohmann::json config_to_json(const ModelConfig& c) {
  nlohmann::json j = {{"arch", arch_name(c.arch)},  {"dim", c.dim},
                      {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers},
                      {"n_heads", c.n_heads},       {"n_kv_heads", c.n_kv_heads},
                      {"vocab_size", c.vocab_size}, {"padded_vocab", c.padded_vocab},
                      {"seq_len", c.seq_len},       {"norm_eps", c.norm_eps},
                      {"rope_theta", c.rope_theta}, {"tied_embeddings", c.tied_embeddings}};
  if (c.head_size > 0) j["head_size"] = c.head_size;
  const RopeScaling& r = c.rope_scaling;
  if (r.kind == RopeScaling::Kind::Llama3)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", r.factor},
                         {"low_freq_factor", r.low_freq_factor},
                         {"high_freq_factor", r.high_freq_factor},
                         {"original_max_position_embeddings", r.original_max_positions}};
  if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
  return j;
}

ModelConfig config_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw_input_error(source, "expected a JSON object with the model's dimensions", "config");
  ModelConfig c;
  const std::string arch = field<std::string>(j, "arch", source, "config");
  if (const ModelFamily* f = find_model_family(arch)) c.arch = f->id();
  else
    throw_input_error(source, fmt::format("unknown arch '{}'", arch), "config.arch", -1,
                      "use one of: " + model_family_names());
  c.dim = field<int>(j, "dim", source, "config");
  if (!j.contains("hidden_dim") && (c.dim <= 0 || c.dim > (1 << 28)))  // 4·dim must fit an int (fuzz_train_config)
    throw_input_error(source, fmt::format("dim {} is out of range", c.dim), "config.dim", -1, "a positive size below 2^28");
  c.hidden_dim = j.contains("hidden_dim") ? field<int>(j, "hidden_dim", source, "config") : 4 * c.dim;
  c.n_layers = field<int>(j, "n_layers", source, "config");
  c.n_heads = field<int>(j, "n_heads", source, "config");
  c.n_kv_heads = j.contains("n_kv_heads") ? field<int>(j, "n_kv_heads", source, "config") : c.n_heads;
  c.vocab_size = field<int>(j, "vocab_size", source, "config");
  c.padded_vocab = j.contains("padded_vocab") ? field<int>(j, "padded_vocab", source, "config") : c.vocab_size;
  c.seq_len = field<int>(j, "seq_len", source, "config");
  if (j.contains("norm_eps")) c.norm_eps = field<float>(j, "norm_eps", source, "config");
  if (j.contains("rope_theta")) c.rope_theta = field<float>(j, "rope_theta", source, "config");
  if (j.contains("tied_embeddings")) c.tied_embeddings = field<bool>(j, "tied_embeddings", source, "config");
  if (j.contains("head_size")) c.head_size = field<int>(j, "head_size", source, "config");
  if (j.contains("sliding_window")) c.sliding_window = field<int>(j, "sliding_window", source, "config");
  if (j.contains("rope_scaling")) {
    const nlohmann::json& r = j["rope_scaling"];
    const std::string where = "config.rope_scaling";
    if (field<std::string>(r, "rope_type", source, where) != "llama3")
      throw_input_error(source, "only llama3 RoPE scaling is known", where + ".rope_type", -1, "use \"llama3\"");
    c.rope_scaling.kind = RopeScaling::Kind::Llama3;
    c.rope_scaling.factor = field<float>(r, "factor", source, where);
    c.rope_scaling.low_freq_factor = field<float>(r, "low_freq_factor", source, where);
    c.rope_scaling.high_freq_factor = field<float>(r, "high_freq_factor", source, where);
    c.rope_scaling.original_max_positions = field<int>(r, "original_max_position_embeddings", source, where);
  }
  c.validate(source);
  return c;
}

void write_checkpoint(const std::string& path, const CheckpointState& state, const nlohmann::json& options,
                      const Params& params, const AdamW& opt) {
  auto& o = const_cast<AdamW&>(opt);  // m()/v() are non-const accessors; nothing is modified
  ORION_CHECK(o.m().size() == params.size() && o.v().size() == params.size(), "optimiser/parameter layout mismatch");
  CheckpointState s = state;
  s.adam_steps = opt.step_count();
  nlohmann::json header = {{"config", config_to_json(params.config())}, {"state", state_to_json(s)}, {"options", options}};
  std::string text = header.dump();
  text.resize(align64(kFixedHeader + text.size()) - kFixedHeader, '\0');  // JSON then zeros to 64
  const uint32_t json_len = uint32_t(text.size());
  const uint64_t n = params.size();
  const size_t bytes = n * sizeof(float);
  uint64_t h = checkpoint_hash(text.data(), text.size());
  h = checkpoint_hash(params.data(), bytes, h);
  h = checkpoint_hash(o.m().data(), bytes, h);
  h = checkpoint_hash(o.v().data(), bytes, h);
  write_file_atomic(path, [&](FileWriter& w) {
    w.write(kCheckpointMagic, 8);
    w.write_pod(kCheckpointVersion);
    w.write_pod(json_len);
    w.write_pod(n);
    w.write_pod(h);
    w.write_str(text);
    w.write(params.data(), bytes);
    w.write(o.m().data(), bytes);
    w.write(o.v().data(), bytes);
  });
}

Checkpoint read_checkpoint(const std::string& path) {
  if (is_directory(path)) throw_usage_error(fmt::format("'{}' is a folder; read_checkpoint takes a file", path));
  auto file = MappedFile::open(path);
  return parse_checkpoint(file->data(), file->size(), path);
}

Checkpoint parse_checkpoint(const uint8_t* data, size_t size, const std::string& path) {
  ByteReader r(data, size, path);
  if (size < 8 || std::memcmp(data, kCheckpointMagic, 8) != 0)
    throw_input_error(path, "bad magic (expected \"ORIONCKP\")", "magic", 0, kMagicHint);
  r.seek(8, "magic");
  const uint32_t version = r.read<uint32_t>("version");
  if (version != kCheckpointVersion)
    throw_input_error(path, fmt::format("version {} (this Orion reads version {})", version, kCheckpointVersion), "version",
                      8, "the checkpoint was written by another Orion version; resume it with that version");
  const uint32_t json_len = r.read<uint32_t>("header_len");
  const uint64_t n = r.read<uint64_t>("n_floats");
  const uint64_t stored_hash = r.read<uint64_t>("checksum");
  const uint8_t* text = r.bytes(json_len, "header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(
        std::string(reinterpret_cast<const char*>(text), strnlen(reinterpret_cast<const char*>(text), json_len)));
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(path, fmt::format("the JSON header does not parse: {}", e.what()), "header", kFixedHeader);
  }
  if (!header.is_object() || !header.contains("config") || !header.contains("state"))
    throw_input_error(path, "the JSON header lacks config or state", "header", kFixedHeader);
  Checkpoint ck(config_from_json(header["config"], path));
  ck.state = state_from_json(header["state"], path);
  ck.options = header.value("options", nlohmann::json::object());
  if (n != ck.params.size())
    throw_input_error(path, fmt::format("{} floats per array, the config's layout has {}", n, ck.params.size()), "n_floats",
                      16);
  const size_t bytes = n * sizeof(float);
  const size_t expected = kFixedHeader + json_len + 3 * bytes;
  if (size != expected)
    throw_input_error(path, fmt::format("the file has {} bytes, its header describes {}", size, expected), "size", -1,
                      size < expected ? "the file is truncated (an interrupted copy?); resume from an older checkpoint"
                                      : "the file has trailing bytes; resume from an older checkpoint");
  const uint64_t h = checkpoint_hash(data + kFixedHeader, size - kFixedHeader);
  if (h != stored_hash)
    throw_input_error(path, fmt::format("checksum {:016x}, computed {:016x}", stored_hash, h), "checksum", 24,
                      "the file is damaged; resume from an older checkpoint");
  const uint8_t* arrays = data + kFixedHeader + json_len;
  std::memcpy(ck.params.data(), arrays, bytes);
  ck.m.resize(n);
  ck.v.resize(n);
  std::memcpy(ck.m.data(), arrays + bytes, bytes);
  std::memcpy(ck.v.data(), arrays + 2 * bytes, bytes);
  check_finite(ck.params, path);
  return ck;
}

std::string checkpoint_name(int64_t step) { return fmt::format("ckpt_{:08d}.ckpt", step); }

std::vector<std::string> list_checkpoints(const std::string& dir) {
  static const std::regex name(R"(ckpt_(\d+)\.ckpt)");
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (e.is_regular_file(ec) && std::regex_match(file, m, name)) found.emplace_back(std::stoll(m[1]), e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(f.second);
  return paths;
}

std::string save_checkpoint(const std::string& dir, const CheckpointState& state, const nlohmann::json& options,
                            const Params& params, const AdamW& opt, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string path = (fs::path(dir) / checkpoint_name(state.step)).string();
  write_checkpoint(path, state, options, params, opt);
  if (keep > 0) {
    auto all = list_checkpoints(dir);
    for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove(all[i], ec);
  }
  return path;
}

Checkpoint load_latest_checkpoint(const std::string& path, std::string* used) {
  if (!fs::exists(path)) throw_input_error(path, "no such file or folder", "--resume");
  if (!is_directory(path)) {
    if (used) *used = path;
    return read_checkpoint(path);
  }
  std::string dir = path;
  if (list_checkpoints(dir).empty() && is_directory((fs::path(path) / "checkpoints").string()))
    dir = (fs::path(path) / "checkpoints").string();
  auto all = list_checkpoints(dir);
  if (all.empty())
    throw_input_error(path, "holds no checkpoint (ckpt_*.ckpt)", "--resume", -1,
                      "point --resume at the --out folder of an earlier `orion train` run");
  for (size_t i = all.size(); i-- > 0;) {
    try {
      if (used) *used = all[i];
      return read_checkpoint(all[i]);
    } catch (const Error& e) {
      if (i == 0) throw;
      std::fprintf(stderr, "orion: warning: skipping a damaged checkpoint: %s\n", e.what());
    }
  }
  ORION_CHECK(false, "unreachable");
}

}  // namespace orion::train
