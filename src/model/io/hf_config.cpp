// Hugging Face config.json ⇄ ModelConfig. The fields of each architecture are its family's
// (model/family/<name>/: read_hf_config, hf_config_json); this file holds the typed reader and the
// model_type dispatch.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_error.h"
#include "model/family/family.h"
#include "model/io/io_internal.h"

namespace orion::io {

using json = nlohmann::json;

void HfConfigReader::fail(const std::string& field, const std::string& msg) const {
  throw_input_error(path_, msg, prefix_ + field, -1, "fix config.json, or take it from the model's original repository");
}

bool HfConfigReader::has(const char* k) const { return j_.contains(k) && !j_[k].is_null(); }
bool HfConfigReader::present(const char* k) const { return j_.contains(k); }

int HfConfigReader::count_or(const char* k, int fallback) const {
  if (!has(k)) return fallback;
  if (!j_[k].is_number_integer() || j_[k].get<int64_t>() < 0 || j_[k].get<int64_t>() > (int64_t(1) << 30))
    fail(k, fmt::format("must be an integer ≥ 0, got {}", j_[k].dump()));
  return int(j_[k].get<int64_t>());
}

std::string HfConfigReader::string_or(const char* k, const std::string& fallback) const {
  if (!has(k)) return fallback;
  if (!j_[k].is_string()) fail(k, fmt::format("must be a string, got {}", j_[k].dump()));
  return j_[k].get<std::string>();
}

HfConfigReader HfConfigReader::object(const char* k) const {
  if (!has(k) || !j_[k].is_object()) fail(k, fmt::format("must be an object, got {}", has(k) ? j_[k].dump() : "null"));
  return HfConfigReader(path_, j_[k], prefix_ + k + ".");
}

int HfConfigReader::positive_int(const char* k) const {
  if (!has(k)) fail(k, "is missing");
  if (!j_[k].is_number_integer()) fail(k, fmt::format("must be an integer, got {}", j_[k].dump()));
  int64_t v = j_[k].get<int64_t>();
  if (v <= 0 || v > (int64_t(1) << 30)) fail(k, fmt::format("must be a positive integer, got {}", v));
  return int(v);
}

float HfConfigReader::positive_float(const char* k, std::optional<float> fallback) const {
  if (!has(k)) {
    if (fallback) return *fallback;
    fail(k, "is missing");
  }
  if (!j_[k].is_number()) fail(k, fmt::format("must be a number, got {}", j_[k].dump()));
  double v = j_[k].get<double>();
  if (!(v > 0)) fail(k, fmt::format("must be positive, got {}", v));
  return float(v);
}

bool HfConfigReader::boolean_or(const char* k, bool fallback) const {
  if (!has(k)) return fallback;
  if (!j_[k].is_boolean()) fail(k, fmt::format("must be true or false, got {}", j_[k].dump()));
  return j_[k].get<bool>();
}

json json_float(float v) { return std::stod(fmt::format("{}", v)); }

namespace {
// "\"llama\" and \"gpt2\"": the model types Orion runs, for the error on any other.
std::string quoted_model_types() {
  std::vector<std::string> q;
  for (const ModelFamily* f : model_families()) q.push_back(fmt::format("\"{}\"", f->hf_model_type()));
  if (q.size() == 1) return q[0];
  std::string last = q.back();
  q.pop_back();
  return fmt::format("{} and {}", fmt::join(q, ", "), last);
}
}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  if (!file_exists(path))
    throw_input_error(path, "config.json is missing", {}, -1,
                      "a safetensors model needs the config.json of its Hugging Face repository beside model.safetensors");
  std::string text = read_text_file(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e7777 (fuzz_hf_config)
    throw_input_error(path, fmt::format("not valid JSON: {}", e.what()), {},
                      int64_t(json_error_byte(e) > 0 ? json_error_byte(e) - 1 : 0), "fix config.json");
  }
  if (!j.is_object()) throw_input_error(path, "config.json is not a JSON object");
  HfConfigReader r{path, j};
  std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  const ModelFamily* family = find_hf_family(type);
  if (!family)
    r.fail("model_type",
           type.empty() ? "is missing" : fmt::format("'{}' is not supported (Orion runs {})", type, quoted_model_types()));
  // The class the checkpoint was saved from must be the family's causal LM (not a classifier head,
  // not a mixture of experts registered under the same model_type).
  if (r.has("architectures")) {
    const json& a = j["architectures"];
    if (!a.is_array() || std::find(a.begin(), a.end(), json(family->hf_architecture())) == a.end())
      r.fail("architectures", fmt::format("{} is not supported (Orion runs {} for model_type \"{}\")", a.dump(),
                                          family->hf_architecture(), type));
  }
  ModelConfig c = family->read_hf_config(r);
  c.validate(path);
  return c;
}

std::string hf_config_json(const ModelConfig& c, DType dtype) {
  json j = model_family(c.arch).hf_config_json(c);
  j["torch_dtype"] = dtype_name(dtype, DTypeSpelling::Torch);
  return j.dump(2) + "\n";
}

}  // namespace orion::io
