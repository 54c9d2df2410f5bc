#include "data/document_stream.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "data/builtin_corpus.h"
#include "data/text_documents.h"
#include "data/tinystories_json.h"

namespace orion::data {
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kBuiltinBytesPerStory = 650;  // average story length; only for progress and ETA

bool has_ext(const fs::path& p, const char* ext) { return p.extension() == ext; }

uint64_t parse_count(const std::string& spec, const std::string& s, const char* what) {
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size())
    throw_usage_error(fmt::format("'{}' in '{}' is not a {}", s, spec, what), "--in",
                      "write builtin, builtin:N or builtin:N:SEED");
  return v;
}

TextInput builtin_input(const std::string& spec) {
  TextInput in{TextInput::Kind::Builtin, "builtin"};
  in.builtin_count = kDefaultBuiltinStories;
  if (spec.size() > 7) {
    std::string rest = spec.substr(8);
    size_t colon = rest.find(':');
    in.builtin_count = parse_count(spec, rest.substr(0, colon), "story count");
    if (colon != std::string::npos) in.builtin_seed = parse_count(spec, rest.substr(colon + 1), "seed");
  }
  if (in.builtin_count == 0) throw_usage_error("builtin:0 has no stories", "--in");
  in.size_bytes = in.builtin_count * kBuiltinBytesPerStory;
  return in;
}

TextInput file_input(const fs::path& p) {
  if (has_ext(p, ".bin"))
    throw_usage_error(fmt::format("{} looks like a token file, which holds no text", p.string()), "--in",
                      "pass text: TinyStories *.json, *.txt files, folders of them, or builtin");
  TextInput in{has_ext(p, ".json") ? TextInput::Kind::TinyStoriesJson : TextInput::Kind::PlainText, p.string()};
  std::error_code ec;
  in.size_bytes = fs::file_size(p, ec);
  return in;
}

}  // namespace

std::vector<TextInput> resolve_text_inputs(const std::vector<std::string>& specs) {
  std::vector<TextInput> out;
  for (const std::string& spec : specs) {
    if (spec == "builtin" || spec.rfind("builtin:", 0) == 0) {
      out.push_back(builtin_input(spec));
    } else if (is_directory(spec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::recursive_directory_iterator(spec))
        if (e.is_regular_file() && (has_ext(e.path(), ".json") || has_ext(e.path(), ".txt"))) files.push_back(e.path());
      if (files.empty())
        throw_input_error(spec, "the folder holds no *.json or *.txt files", {}, -1, "expected TinyStories shards or text");
      std::sort(files.begin(), files.end());
      for (const auto& f : files) out.push_back(file_input(f));
    } else if (file_exists(spec)) {
      out.push_back(file_input(spec));
    } else {
      throw_input_error(spec, "no such file or folder", {}, -1, "pass a file, a folder, or builtin[:N]");
    }
  }
  if (out.empty()) throw_usage_error("no input given", "--in", "pass --in FILE, --in FOLDER or --in builtin");
  return out;
}

// One open input: exactly one of the readers is set.
struct DocumentStream::Source {
  std::unique_ptr<TinyStoriesReader> json;
  std::unique_ptr<TextDocumentReader> text;
  uint64_t builtin_next = 0;
  const TextInput* input = nullptr;

  bool next(std::string& doc) {
    if (json) return json->next(doc);
    if (text) return text->next(doc);
    if (builtin_next >= input->builtin_count) return false;
    doc = builtin_story(builtin_next++, input->builtin_seed);
    return true;
  }
  uint64_t done() const {
    if (json) return json->offset();
    if (text) return text->offset();
    return builtin_next * kBuiltinBytesPerStory;
  }
};

DocumentStream::DocumentStream(std::vector<TextInput> inputs) : inputs_(std::move(inputs)) {
  for (const auto& in : inputs_) total_ += in.size_bytes;
}

DocumentStream::~DocumentStream() = default;

bool DocumentStream::next(std::string& doc) {
  while (current_ < inputs_.size()) {
    if (!source_) {
      source_ = std::make_unique<Source>();
      const TextInput& in = inputs_[current_];
      source_->input = &in;
      if (in.kind == TextInput::Kind::TinyStoriesJson) source_->json = std::make_unique<TinyStoriesReader>(in.path);
      if (in.kind == TextInput::Kind::PlainText) source_->text = std::make_unique<TextDocumentReader>(in.path);
    }
    while (source_->next(doc)) {
      if (doc.find_first_not_of(" \t\r\n") == std::string::npos) continue;  // blank
      ++docs_;
      return true;
    }
    finished_bytes_ += inputs_[current_].size_bytes;
    source_.reset();
    ++current_;
  }
  return false;
}

uint64_t DocumentStream::bytes_done() const { return finished_bytes_ + (source_ ? source_->done() : 0); }

}  // namespace orion::data
