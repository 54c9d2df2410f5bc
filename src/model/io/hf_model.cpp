// Hugging Face checkpoints (model.safetensors or shards + index, and config.json) ⇄ Orion's canonical weights: the
// folder layout, the tensor lookups, and the dispatch to the family, whose files name the tensors
// (model/family/<name>/: read_hf_tensors, hf_tensors).
// Matrices that need no rearranging stay views into the mapping in their stored dtype; transposed
// or permuted ones are copied (same dtype); vectors become f32.
#include <filesystem>

#include "base/error.h"
#include "model/family/family.h"
#include "model/io/io_internal.h"

namespace orion::io {
namespace fs = std::filesystem;

namespace {

struct HfPaths {
  std::string weights, config;
};

constexpr const char* kShardIndex = "model.safetensors.index.json";

// The weights of a folder: model.safetensors, else the shard index, else the folder's only
// *.safetensors.
std::string weights_in(const fs::path& dir) {
  fs::path st = dir / "model.safetensors";
  if (file_exists(st.string())) return st.string();
  if (file_exists((dir / kShardIndex).string())) return (dir / kShardIndex).string();
  std::vector<std::string> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec))
    if (e.path().extension() == ".safetensors") found.push_back(e.path().string());
  if (found.size() == 1) return found[0];
  throw_input_error(dir.string(),
                    found.empty() ? "no model.safetensors in this folder"
                                  : "several *.safetensors files and no model.safetensors",
                    {}, -1, "pass the path of the .safetensors file to read");
}

HfPaths resolve(const std::string& path) {
  fs::path p(path);
  if (is_directory(path)) return {weights_in(p), (p / "config.json").string()};
  if (p.filename() == "config.json") return {weights_in(p.parent_path()), path};
  return {path, (p.parent_path() / "config.json").string()};
}

}  // namespace

// Several same-width matrices (or vectors) stacked along their first dimension into one new
// tensor of dtype dt: [Σ rows, cols] (or [Σ n]).
Tensor stack_rows(ModelWeights& scratch, const std::vector<const Tensor*>& parts, DType dt) {
  std::vector<int64_t> shape = parts[0]->shape;
  shape[0] = 0;
  for (auto* p : parts) shape[0] += p->shape[0];
  void* dst;
  Tensor out = scratch.alloc_tensor(shape, dt, &dst);
  uint8_t* at = static_cast<uint8_t*>(dst);
  for (auto* p : parts) {
    convert_dtype(p->data, p->dtype, at, dt, size_t(p->numel()));
    at += dtype_bytes(dt, size_t(p->numel()));
  }
  return out;
}

const SafetensorsEntry& HfTensorReader::get(const std::string& name, std::vector<int64_t> shape) const {
  const std::string* file = nullptr;
  const SafetensorsEntry* e = f_.find(prefix + name, &file);
  if (!e)
    throw_input_error(f_.path(), "tensor is missing", prefix + name, -1,
                      "the checkpoint is incomplete or does not match config.json's model_type");
  if (!e->dtype)
    throw_input_error(*file, fmt::format("dtype {} is not supported (Orion reads F32, F16 and BF16)", e->dtype_name),
                      e->name, int64_t(e->file_offset), "convert the checkpoint to float32, float16 or bfloat16");
  if (e->shape != shape)
    throw_input_error(*file,
                      fmt::format("has shape [{}], config.json implies [{}]", fmt::join(e->shape, ", "),
                                  fmt::join(shape, ", ")),
                      e->name, int64_t(e->file_offset), "config.json does not belong to these weights");
  return *e;
}

Tensor HfTensorReader::matrix(const std::string& name, int64_t rows, int64_t cols) {
  const SafetensorsEntry& e = get(name, {rows, cols});
  return view_or_copy(w_, e.data, *e.dtype, {rows, cols});
}

Tensor HfTensorReader::vector(const std::string& name, int64_t n) {
  const SafetensorsEntry& e = get(name, {n});
  return vector_f32(w_, e.data, *e.dtype, n);
}

ModelWeights read_hf(const std::string& path) {
  HfPaths p = resolve(path);
  ModelConfig c = read_hf_config(p.config);
  SafetensorsCheckpoint f = p.weights.ends_with(".index.json") ? SafetensorsCheckpoint::open_index(p.weights)
                                                                 : SafetensorsCheckpoint::open_file(p.weights);
  ModelWeights w;
  w.config = c;
  f.keep_mappings(w);
  w.layers.resize(size_t(c.n_layers));
  HfTensorReader t(f, w);
  model_family(c.arch).read_hf_tensors(t, w);
  return w;
}

void write_hf(const ModelWeights& w, const std::string& path, std::optional<DType> dtype) {
  const DType dt = dtype.value_or(w.matrix_dtype());
  std::string weights_path, config_path;
  if (path.size() > 12 && path.ends_with(".safetensors")) {
    weights_path = path;
    config_path = (fs::path(path).parent_path() / "config.json").string();
  } else {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw_runtime_error(fmt::format("cannot create folder: {}", ec.message()), path);
    weights_path = (fs::path(path) / "model.safetensors").string();
    config_path = (fs::path(path) / "config.json").string();
  }
  ModelWeights scratch;
  auto named = model_family(w.config.arch).hf_tensors(w, scratch, dt);
  std::vector<SafetensorsOut> outs;
  // Matrices in the requested dtype; vectors stay f32 so that they round-trip exactly.
  for (auto& [name, t] : named) outs.push_back({name, &t, t.shape.size() == 2 ? dt : DType::F32});
  write_safetensors(weights_path, outs, {{"format", "pt"}});
  std::string config = hf_config_json(w.config, dt);
  write_file_atomic(config_path, [&](FileWriter& out) { out.write_str(config); });
}

}  // namespace orion::io
