// The safetensors files of a Hugging Face checkpoint (io_internal.h SafetensorsCheckpoint): one
// model.safetensors, or shards named by model.safetensors.index.json:
//   {"metadata": {"total_size": …}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors", …}}
// Each shard is mapped once and checked like any safetensors file; every tensor the index places in
// a shard must be there, so that a later lookup failing means "not in the checkpoint", never
// "the index lied".
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_error.h"
#include "model/io/io_internal.h"

namespace orion::io {
namespace fs = std::filesystem;
using json = nlohmann::json;

SafetensorsCheckpoint SafetensorsCheckpoint::open_file(const std::string& path) {
  SafetensorsCheckpoint c;
  c.path_ = path;
  c.files_.push_back(SafetensorsFile::open(path));
  return c;
}

namespace {
json parse_index(const std::string& path) {
  try {
    json j = json::parse(read_text_file(path));
    if (j.is_object() && j.contains("weight_map") && j["weight_map"].is_object()) return j;
  } catch (const json::exception& e) {
    throw_input_error(path, fmt::format("not valid JSON: {}", e.what()), {},
                      int64_t(json_error_byte(e) > 0 ? json_error_byte(e) - 1 : 0), "download the index again");
  }
  throw_input_error(path, "has no \"weight_map\" object", "weight_map", -1, "download the index again");
}
}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open_index(const std::string& index_path) {
  SafetensorsCheckpoint c;
  c.path_ = index_path;
  const json index = parse_index(index_path);
  const fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, size_t> file_index;  // shard file name → index into files_
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    const std::string& tensor = it.key();
    if (!it.value().is_string())
      throw_input_error(index_path, fmt::format("must name a shard file, got {}", it.value().dump()), tensor);
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || fs::path(shard).filename() != shard)  // a name beside the index, no path
      throw_input_error(index_path, fmt::format("shard \"{}\" is not a file name beside the index", shard), tensor);
    auto [at, added] = file_index.emplace(shard, c.files_.size());
    if (added) {
      const std::string shard_path = (dir / shard).string();
      if (!file_exists(shard_path))
        throw_input_error(index_path, fmt::format("shard {} is missing", shard), tensor, -1,
                          "download every model-*-of-*.safetensors file the index names");
      c.files_.push_back(SafetensorsFile::open(shard_path));
    }
    if (!c.files_[at->second].find(tensor))
      throw_input_error(c.files_[at->second].path(), fmt::format("tensor is missing (the index {} places it here)", index_path),
                        tensor, -1, "the shards do not belong to this index; download them again");
    c.shard_of_[tensor] = at->second;
  }
  return c;
}

const SafetensorsEntry* SafetensorsCheckpoint::find(const std::string& name, const std::string** file) const {
  size_t i = 0;
  if (!shard_of_.empty()) {  // sharded: where the index says
    auto it = shard_of_.find(name);
    if (it == shard_of_.end()) return nullptr;
    i = it->second;
  } else if (files_.empty()) {
    return nullptr;
  }
  const SafetensorsEntry* e = files_[i].find(name);
  if (e && file) *file = &files_[i].path();
  return e;
}

void SafetensorsCheckpoint::keep_mappings(ModelWeights& w) const {
  for (const SafetensorsFile& f : files_) w.keep(f.mapping());
}

}  // namespace orion::io
