#include "model/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "base/error.h"
#include "base/file.h"

namespace orion {
namespace {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible stand-in for a space.
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

std::string replace_space_marks(const std::string& piece) {
  std::string out;
  for (size_t pos = 0; pos < piece.size();) {
    if (piece.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
      out += ' ';
      pos += kSpaceMark.size();
    } else {
      out += piece[pos++];
    }
  }
  return out;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : file_(path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  auto file = MappedFile::open(path);  // a clear error for a missing file
  if (file->size() == 0) throw_input_error(path, "the file is empty", {}, -1, "expected a SentencePiece .model");
  // libsentencepiece answers most bad models with a status, but some (a zero-length piece reaching
  // its darts-clone trie builder) with a C++ exception; both become the same input error.
  sentencepiece::util::Status status;
  try {
    status = sp_->LoadFromSerializedProto({reinterpret_cast<const char*>(file->data()), file->size()});
  } catch (const std::exception& e) {
    throw_input_error(path, fmt::format("not a valid SentencePiece model: {}", e.what()), {}, -1,
                      "expected a tokenizer.model written by spm_train or shipped with the model");
  }
  if (!status.ok())
    throw_input_error(path, fmt::format("not a valid SentencePiece model: {}", status.ToString()), {}, -1,
                      "expected a tokenizer.model written by spm_train or shipped with the model");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int> SentencePieceTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  if (!status.ok())
    throw_runtime_error(fmt::format("SentencePiece could not encode the text: {}", status.ToString()), file_);
  if (add_bos && bos_id() >= 0) ids.insert(ids.begin(), bos_id());
  return ids;
}

std::string SentencePieceTokenizer::decode_token(int prev, int id) const {
  if (id < 0 || id >= vocab_size())
    throw_input_error(file_, fmt::format("token id {} is not in the vocabulary (ids 0..{})", id, vocab_size() - 1));
  if (sp_->IsControl(id)) return "";
  if (sp_->IsUnknown(id)) return " \xE2\x81\x87 ";
  if (sp_->IsByte(id)) {
    // Byte pieces are spelled <0xXX>.
    const std::string& p = sp_->IdToPiece(id);
    return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));
  }
  std::string s = replace_space_marks(sp_->IdToPiece(id));
  const bool first = prev < 0 || prev == bos_id();
  if (first && !s.empty() && s[0] == ' ') s.erase(0, 1);
  return s;
}

int SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int SentencePieceTokenizer::bos_id() const { return sp_->bos_id(); }
int SentencePieceTokenizer::eos_id() const { return sp_->eos_id(); }

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) {
  return std::make_unique<SentencePieceTokenizer>(path);
}

}  // namespace orion
