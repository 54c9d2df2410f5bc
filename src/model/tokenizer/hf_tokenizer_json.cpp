// The reader of Hugging Face tokenizer.json files (and the tokenizer_config.json beside them) for
// HfBpeTokenizer. Every problem is an Input error naming the file and the JSON path of the field,
// e.g. "tokenizer.json: field 'pre_tokenizer.pretokenizers[0].pattern.Regex': PCRE2 rejects ...".
// What Orion does not implement (Unigram and WordPiece models, BERT-style processors, ...) is
// refused by name rather than encoded differently from Hugging Face.
#include <algorithm>
#include <filesystem>
#include <functional>

#include "base/error.h"
#include "base/file.h"
#include "model/tokenizer/hf_tokenizer.h"
#include "model/tokenizer/tokenizer_json.h"

namespace orion {
namespace {

using nlohmann::json;
using Pre = HfPreTokenizerStep;

// Typed access to one file's JSON, with the path of each field for errors.
struct JsonReader {
  std::string file;

  static std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
  [[noreturn]] void fail(const std::string& path, const std::string& message, const std::string& hint = {}) const {
    throw_input_error(file, message, path, -1, hint);
  }
  const json& object(const json& j, const std::string& path) const {
    if (!j.is_object()) fail(path, fmt::format("expected an object, found {}", j.type_name()));
    return j;
  }
  const json& array(const json& j, const std::string& path) const {
    if (!j.is_array()) fail(path, fmt::format("expected an array, found {}", j.type_name()));
    return j;
  }
  // The member key of obj, or nullptr when it is absent or null.
  static const json* member(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const json& obj, const char* key, const std::string& path, const std::string& fallback = {}) const {
    const json* v = member(obj, key);
    if (!v) return fallback;
    if (!v->is_string()) fail(join(path, key), fmt::format("expected a string, found {}", v->type_name()));
    return v->get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& path, bool fallback) const {
    const json* v = member(obj, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(join(path, key), fmt::format("expected true or false, found {}", v->type_name()));
    return v->get<bool>();
  }
  int integer(const json& obj, const char* key, const std::string& path, int fallback) const {
    const json* v = member(obj, key);
    if (!v) return fallback;
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > INT32_MAX)
      fail(join(path, key), fmt::format("expected a non-negative integer, found {}", v->dump()));
    return v->get<int>();
  }
  std::string type(const json& obj, const std::string& path) const { return string(object(obj, path), "type", path); }
  // A Sequence's list (obj[key], an array): calls read(element, its path) for each element.
  void each(const json& obj, const char* key, const std::string& path,
            const std::function<void(const json&, const std::string&)>& read) const {
    const json* list = member(obj, key);
    if (!list) fail(join(path, key), fmt::format("no {}", key));
    array(*list, join(path, key));
    for (size_t i = 0; i < list->size(); ++i) read((*list)[i], fmt::format("{}.{}[{}]", path, key, i));
  }
  [[noreturn]] void unsupported(const std::string& what, const std::string& type, const std::string& path) const {
    fail(path, fmt::format("{} type '{}' is not supported", what, type), "Orion reads BPE tokenizer.json files of the "
                                                                            "GPT-2, Llama 3, Qwen2, SmolLM2, Llama 2 and Mistral kinds");
  }

  // {"String": "..."} (a literal) or {"Regex": "..."}, compiled; a pattern PCRE2 rejects is an error here.
  std::shared_ptr<HfRegex> pattern(const json& obj, const std::string& path) const {
    const json* p = member(object(obj, path), "pattern");
    if (!p) fail(path + ".pattern", "no pattern");
    object(*p, path + ".pattern");
    const bool literal = p->contains("String");
    const std::string field = path + (literal ? ".pattern.String" : ".pattern.Regex");
    if (!literal && !p->contains("Regex")) fail(path + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
    const std::string text = string(*p, literal ? "String" : "Regex", path + ".pattern");
    try {
      return std::make_shared<HfRegex>(literal ? HfRegex::literal(text) : HfRegex(text));
    } catch (const std::invalid_argument& e) {
      fail(field, e.what(), "the pattern must be a regular expression PCRE2 accepts");
    }
  }
  // A {"String": ...} pattern only (decoders replace literal text).
  std::string literal_pattern(const json& obj, const std::string& path) const {
    const json* p = member(object(obj, path), "pattern");
    if (!p || !p->is_object() || !p->contains("String"))
      fail(path + ".pattern", "expected {\"String\": ...}", "a decoder Replace with a Regex pattern is not supported");
    return string(*p, "String", path + ".pattern");
  }
};

void read_normalizer(const JsonReader& r, const json& j, const std::string& path, std::vector<HfNormalizerStep>& out) {
  using K = HfNormalizerStep::Kind;
  const std::string type = r.type(j, path);
  if (type == "Sequence") {
    r.each(j, "normalizers", path, [&](const json& e, const std::string& p) { read_normalizer(r, e, p, out); });
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    out.push_back({type == "NFC" ? K::NFC : type == "NFD" ? K::NFD : type == "NFKC" ? K::NFKC : K::NFKD, {}, {}});
  } else if (type == "Prepend") {
    out.push_back({K::Prepend, r.string(j, "prepend", path), {}});
  } else if (type == "Replace") {
    out.push_back({K::Replace, r.string(j, "content", path), r.pattern(j, path)});
  } else if (type == "Lowercase") {
    out.push_back({K::Lowercase, {}, {}});
  } else {
    r.unsupported("normalizer", type, path);
  }
}

Pre::Behavior split_behavior(const JsonReader& r, const json& j, const std::string& path) {
  const std::string b = r.string(j, "behavior", path, "Isolated");
  if (b == "Isolated") return Pre::Behavior::Isolated;
  if (b == "Removed") return Pre::Behavior::Removed;
  if (b == "MergedWithPrevious") return Pre::Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Pre::Behavior::MergedWithNext;
  if (b == "Contiguous") return Pre::Behavior::Contiguous;
  r.fail(path + ".behavior", fmt::format("unknown behavior '{}'", b),
         "one of Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous");
}

// Metaspace's prepend_scheme; older files say add_prefix_space (true: always) instead.
Pre::Prepend prepend_scheme(const JsonReader& r, const json& j, const std::string& path) {
  if (!JsonReader::member(j, "prepend_scheme"))
    return r.boolean(j, "add_prefix_space", path, true) ? Pre::Prepend::Always : Pre::Prepend::Never;
  const std::string s = r.string(j, "prepend_scheme", path);
  if (s == "always") return Pre::Prepend::Always;
  if (s == "first") return Pre::Prepend::First;
  if (s == "never") return Pre::Prepend::Never;
  r.fail(path + ".prepend_scheme", fmt::format("unknown prepend_scheme '{}'", s), "one of always, first, never");
}

void read_pre_tokenizer(const JsonReader& r, const json& j, const std::string& path, HfTokenizerSpec& spec) {
  const std::string type = r.type(j, path);
  Pre step{};
  if (type == "Sequence") {
    r.each(j, "pretokenizers", path, [&](const json& e, const std::string& p) { read_pre_tokenizer(r, e, p, spec); });
    return;
  } else if (type == "ByteLevel") {
    step.kind = Pre::Kind::ByteLevel;
    step.add_prefix_space = r.boolean(j, "add_prefix_space", path, false);
    if (r.boolean(j, "use_regex", path, true)) step.pattern = std::make_shared<HfRegex>(gpt2_pattern());
    spec.byte_level = true;
  } else if (type == "Split") {
    step.kind = Pre::Kind::Split;
    step.pattern = r.pattern(j, path);
    step.behavior = split_behavior(r, j, path);
    step.invert = r.boolean(j, "invert", path, false);
  } else if (type == "Metaspace") {
    step.kind = Pre::Kind::Metaspace;
    step.replacement = r.string(j, "replacement", path, "\xE2\x96\x81");
    if (step.replacement.empty()) r.fail(path + ".replacement", "the replacement is empty");
    step.prepend = prepend_scheme(r, j, path);
    step.split = r.boolean(j, "split", path, true);
  } else if (type == "Digits") {
    step.kind = Pre::Kind::Digits;
    step.individual_digits = r.boolean(j, "individual_digits", path, false);
  } else {
    r.unsupported("pre_tokenizer", type, path);
  }
  spec.pre_tokenizer.push_back(std::move(step));
}

void read_decoder(const JsonReader& r, const json& j, const std::string& path, HfTokenizerSpec& spec) {
  using K = HfDecoderStep::Kind;
  const std::string type = r.type(j, path);
  HfDecoderStep step{};
  if (type == "Sequence") {
    r.each(j, "decoders", path, [&](const json& e, const std::string& p) { read_decoder(r, e, p, spec); });
    return;
  } else if (type == "ByteLevel") {
    step.kind = K::ByteLevel;
    spec.byte_level = true;
  } else if (type == "ByteFallback" || type == "Fuse") {
    step.kind = type == "Fuse" ? K::Fuse : K::ByteFallback;
  } else if (type == "Replace") {
    step.kind = K::Replace;
    step.from = r.literal_pattern(j, path);
    step.to = r.string(j, "content", path);
  } else if (type == "Strip") {
    step.kind = K::Strip;
    step.content = r.string(j, "content", path, " ");
    step.start = r.integer(j, "start", path, 0);
    if (r.integer(j, "stop", path, 0) != 0)
      r.fail(path + ".stop", "a Strip decoder that strips the end is not supported", "tokens are decoded one at a time");
    // Without a Fuse before it, Strip works on every token (Hugging Face applies it per token).
    step.every_token = std::none_of(spec.decoder.begin(), spec.decoder.end(), [](auto& d) { return d.kind == K::Fuse; });
  } else if (type == "Metaspace") {
    step.kind = K::Metaspace;
    step.from = r.string(j, "replacement", path, "\xE2\x96\x81");
  } else {
    r.unsupported("decoder", type, path);
  }
  spec.decoder.push_back(std::move(step));
}

// The id a template's SpecialToken stands for: special_tokens[name].ids, else the token itself.
std::vector<int> template_token_ids(const JsonReader& r, const json& processor, const std::string& name,
                                    const std::string& path, const HfTokenizerSpec& spec) {
  const json* table = JsonReader::member(processor, "special_tokens");
  if (table && table->is_object() && table->contains(name)) {
    const json& entry = r.object((*table)[name], "post_processor.special_tokens." + name);
    const json* ids = JsonReader::member(entry, "ids");
    if (!ids || !ids->is_array()) r.fail("post_processor.special_tokens." + name + ".ids", "expected an array of ids");
    std::vector<int> out;
    for (const json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        r.fail("post_processor.special_tokens." + name + ".ids", fmt::format("expected an id, found {}", id.dump()));
      out.push_back(id.get<int>());
    }
    return out;
  }
  for (const auto& t : spec.added)
    if (t.content == name) return {t.id};
  for (const auto& [token, id] : spec.vocab)
    if (token == name) return {id};
  r.fail(path, fmt::format("the template names '{}', which is not a token", name));
}

void read_template(const JsonReader& r, const json& j, const std::string& path, HfTokenizerSpec& spec) {
  const json* single = JsonReader::member(j, "single");
  if (!single) r.fail(path + ".single", "no single template");
  r.array(*single, path + ".single");
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string item_path = fmt::format("{}.single[{}]", path, i);
    const json& item = r.object((*single)[i], item_path);
    if (const json* s = JsonReader::member(item, "SpecialToken")) {
      const std::string name = r.string(r.object(*s, item_path + ".SpecialToken"), "id", item_path + ".SpecialToken");
      auto ids = template_token_ids(r, j, name, item_path + ".SpecialToken.id", spec);
      auto& side = seen_a ? spec.template_after : spec.template_before;
      side.insert(side.end(), ids.begin(), ids.end());
    } else if (JsonReader::member(item, "Sequence")) {
      seen_a = true;
    } else {
      r.fail(item_path, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  spec.has_template = true;
}

void read_post_processor(const JsonReader& r, const json& j, const std::string& path, HfTokenizerSpec& spec) {
  const std::string type = r.type(j, path);
  if (type == "Sequence") {
    r.each(j, "processors", path, [&](const json& e, const std::string& p) { read_post_processor(r, e, p, spec); });
  } else if (type == "TemplateProcessing") {
    read_template(r, j, path, spec);
  } else if (type != "ByteLevel") {  // ByteLevel only adjusts offsets, which Orion does not report
    r.unsupported("post_processor", type, path);
  }
}

// tokenizer.json "merges": ["left right", ...] (older files) or [["left", "right"], ...] (newer).
void read_merges(const JsonReader& r, const json& merges, HfTokenizerSpec& spec) {
  if (!merges.is_array()) r.fail("model.merges", "expected an array of merges");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string field = fmt::format("model.merges[{}]", i);
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size())
        r.fail(field, fmt::format("expected \"left right\", found \"{}\"", s));
      spec.merges.push_back({s.substr(0, space), s.substr(space + 1)});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.push_back({m[0].get<std::string>(), m[1].get<std::string>()});
    } else {
      r.fail(field, "expected a string \"left right\" or an array [left, right]");
    }
  }
}

void read_model(const JsonReader& r, const json& root, HfTokenizerSpec& spec) {
  const json* model = JsonReader::member(root, "model");
  if (!model || !model->is_object()) r.fail("model", "no \"model\" object");
  const std::string type = r.string(*model, "type", "model", "BPE");
  if (type != "BPE")
    r.fail("model.type", fmt::format("model type '{}' is not supported", type),
           "Orion reads BPE tokenizer.json files (Unigram and WordPiece models are not supported)");
  if (!model->contains("vocab")) r.fail("model.vocab", "no vocabulary");
  if (!model->contains("merges")) r.fail("model.merges", "no merges");
  spec.vocab = read_vocab_object((*model)["vocab"], r.file, "model.vocab");
  read_merges(r, (*model)["merges"], spec);
  if (JsonReader::member(*model, "unk_token")) spec.unk_token = r.string(*model, "unk_token", "model");
  spec.byte_fallback = r.boolean(*model, "byte_fallback", "model", false);
  spec.fuse_unk = r.boolean(*model, "fuse_unk", "model", false);
  spec.ignore_merges = r.boolean(*model, "ignore_merges", "model", false);
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!r.string(*model, affix, "model").empty())
      r.fail(fmt::format("model.{}", affix), "subword prefixes and suffixes are not supported");
}

void read_added_tokens(const JsonReader& r, const json& root, HfTokenizerSpec& spec) {
  const json* added = JsonReader::member(root, "added_tokens");
  if (!added) return;
  r.array(*added, "added_tokens");
  for (size_t i = 0; i < added->size(); ++i) {
    const json& t = (*added)[i];
    const std::string path = fmt::format("added_tokens[{}]", i);
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") || !t["content"].is_string())
      r.fail(path, "expected {\"id\": integer, \"content\": string, ...}");
    HfAddedToken a;
    a.content = t["content"].get<std::string>();
    a.id = r.integer(t, "id", path, -1);
    a.special = r.boolean(t, "special", path, false);
    a.lstrip = r.boolean(t, "lstrip", path, false);
    a.rstrip = r.boolean(t, "rstrip", path, false);
    a.normalized = r.boolean(t, "normalized", path, !a.special);
    spec.added.push_back(std::move(a));
  }
}

// bos_token / eos_token: "text", {"content": "text", ...} or null.
std::optional<std::string> config_token(const JsonReader& r, const json& config, const char* key) {
  const json* v = JsonReader::member(config, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object() && v->contains("content") && (*v)["content"].is_string()) return (*v)["content"].get<std::string>();
  r.fail(key, fmt::format("expected a token text or {{\"content\": ...}}, found {}", v->dump()));
}

void read_tokenizer_config(const std::string& tokenizer_json, HfTokenizerSpec& spec) {
  const std::string path = (std::filesystem::path(tokenizer_json).parent_path() / "tokenizer_config.json").string();
  if (!file_exists(path)) return;
  JsonReader r{path};
  const json config = parse_json_file(path);
  r.object(config, "");
  spec.has_config = true;
  spec.config_file = path;
  spec.add_bos_token = r.boolean(config, "add_bos_token", "", false);
  spec.add_eos_token = r.boolean(config, "add_eos_token", "", false);
  spec.bos_token = config_token(r, config, "bos_token");
  spec.eos_token = config_token(r, config, "eos_token");
}

}  // namespace

HfTokenizerSpec hf_tokenizer_spec(const json& root, const std::string& path) {
  JsonReader r{path};
  if (!root.is_object()) throw_input_error(path, "expected a JSON object at the top level");
  HfTokenizerSpec spec;
  spec.file = path;
  read_model(r, root, spec);
  read_added_tokens(r, root, spec);
  if (const json* n = JsonReader::member(root, "normalizer")) read_normalizer(r, *n, "normalizer", spec.normalizer);
  if (const json* p = JsonReader::member(root, "pre_tokenizer")) read_pre_tokenizer(r, *p, "pre_tokenizer", spec);
  if (const json* p = JsonReader::member(root, "post_processor")) read_post_processor(r, *p, "post_processor", spec);
  if (const json* d = JsonReader::member(root, "decoder")) read_decoder(r, *d, "decoder", spec);
  return spec;
}

std::unique_ptr<Tokenizer> make_hf_tokenizer(HfTokenizerSpec spec) {
  spec.gpt2 = spec.normalizer.empty() && spec.pre_tokenizer.size() == 1 &&
              spec.pre_tokenizer[0].kind == Pre::Kind::ByteLevel && spec.pre_tokenizer[0].pattern && !spec.has_template &&
              !spec.byte_fallback && !spec.ignore_merges;
  return std::make_unique<HfBpeTokenizer>(std::move(spec));
}

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path) {
  HfTokenizerSpec spec = hf_tokenizer_spec(parse_json_file(path), path);
  read_tokenizer_config(path, spec);
  return make_hf_tokenizer(std::move(spec));
}

}  // namespace orion
