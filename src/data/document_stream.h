// Text inputs named on the command line (`--in`), read one document at a time:
//   builtin, builtin:N, builtin:N:SEED   the built-in corpus (builtin_corpus.h); N defaults to 10000
//   *.json                               a TinyStories JSON shard (tinystories_json.h)
//   a folder                             every *.json and *.txt file below it, in sorted path order
//   any other file                       plain text (text_documents.h)
// Token files (*.bin) hold no text; naming one is a Usage error with a hint.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace orion::data {

struct TextInput {
  enum class Kind { Builtin, TinyStoriesJson, PlainText } kind;
  std::string path;            // file (Builtin: "builtin")
  uint64_t builtin_count = 0;  // Builtin only
  uint64_t builtin_seed = 0;
  uint64_t size_bytes = 0;  // file size, or an estimate for the built-in corpus (progress)
};

constexpr uint64_t kDefaultBuiltinStories = 10000;

// Expands folders and parses builtin[:N[:SEED]]. Missing paths and empty folders are errors.
std::vector<TextInput> resolve_text_inputs(const std::vector<std::string>& specs);

class DocumentStream {
 public:
  explicit DocumentStream(std::vector<TextInput> inputs);
  ~DocumentStream();
  bool next(std::string& doc);  // false when every input is read; blank documents are skipped
  uint64_t bytes_done() const;  // progress: bytes of input consumed
  uint64_t bytes_total() const { return total_; }
  uint64_t documents() const { return docs_; }

 private:
  struct Source;
  std::vector<TextInput> inputs_;
  size_t current_ = 0;
  std::unique_ptr<Source> source_;
  uint64_t finished_bytes_ = 0, total_ = 0, docs_ = 0;
};

}  // namespace orion::data
