#include "model/tokenizer/llama2c_tokenizer.h"

#include <queue>

#include "base/error.h"
#include "base/file.h"
#include "base/hex.h"

namespace orion {
namespace {

constexpr int kBosId = 1;
constexpr int kEosId = 2;
constexpr int kByteFallbackOffset = 3;    // <0x00> is id 3
constexpr float kMinMergeScore = -1e10f;  // run.c's starting "best score"

// run.c recognises raw-byte pieces with sscanf("<0x%02hhX>"): "<0x" and one or two hex digits.
bool parse_byte_piece(const std::string& p, uint8_t* byte) {
  if (p.size() < 4 || p.compare(0, 3, "<0x") != 0 || hex_digit(p[3]) < 0) return false;
  int v = hex_digit(p[3]);
  if (p.size() > 4 && hex_digit(p[4]) >= 0) v = v * 16 + hex_digit(p[4]);
  *byte = uint8_t(v);
  return true;
}

}  // namespace

Llama2cTokenizer::Llama2cTokenizer(const std::string& path, int expected_vocab_size) : file_(path) {
  auto file = MappedFile::open(path);
  if (file->size() == 0) throw_input_error(path, "the file is empty", {}, -1, "expected a llama2.c tokenizer.bin");
  ByteReader r(file->data(), file->size(), path);
  int32_t max_len = r.read<int32_t>("max_token_length");
  if (max_len <= 0 || max_len > (1 << 20))
    throw_input_error(path, fmt::format("max_token_length {} is not a plausible piece length", max_len), "max_token_length",
                      0, "is this a llama2.c tokenizer.bin?");
  max_token_length_ = max_len;

  for (int i = 0; expected_vocab_size < 0 ? r.remaining() > 0 : i < expected_vocab_size; ++i) {
    const int64_t at = int64_t(r.offset());
    const std::string field = fmt::format("token {}", i);
    if (r.remaining() < 8)
      throw_input_error(path,
                        fmt::format("the file ends inside token {} ({} bytes left, need 8 for score and length)", i,
                                    r.remaining()),
                        field, at, "the file is truncated");
    float score = r.read<float>("score");
    int32_t len = r.read<int32_t>("length");
    if (len < 0 || len > max_len)
      throw_input_error(path, fmt::format("piece length {} is outside 0..max_token_length ({})", len, max_len), field,
                        at + 4);
    if (size_t(len) > r.remaining())
      throw_input_error(path,
                        fmt::format("piece length {} runs past the end of the file ({} bytes left)", len, r.remaining()),
                        field, at + 4, "the file is truncated");
    const auto* bytes = r.bytes(size_t(len), "piece");
    pieces_.emplace_back(reinterpret_cast<const char*>(bytes), size_t(len));
    scores_.push_back(score);
  }
  index_pieces();
}

Llama2cTokenizer::Llama2cTokenizer(std::string source, std::vector<std::string> pieces, std::vector<float> scores)
    : file_(std::move(source)), pieces_(std::move(pieces)), scores_(std::move(scores)) {
  ORION_CHECK(pieces_.size() == scores_.size(), "{} pieces and {} scores", pieces_.size(), scores_.size());
  for (const std::string& p : pieces_) max_token_length_ = std::max(max_token_length_, int(p.size()));
  index_pieces();
}

void Llama2cTokenizer::index_pieces() {
  if (pieces_.size() < size_t(kByteFallbackOffset + 256))
    throw_input_error(file_, fmt::format("only {} tokens; ids 3..258 must be the 256 byte-fallback pieces", pieces_.size()),
                      {}, -1, "the file is truncated or not a llama2.c tokenizer.bin");

  decoded_.resize(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    uint8_t byte;
    decoded_[id] = parse_byte_piece(pieces_[id], &byte) ? std::string(1, char(byte)) : pieces_[id];
    ids_.emplace(pieces_[id], int(id));  // emplace keeps the first (lowest) id of a duplicate piece
  }
}

int Llama2cTokenizer::lookup(const std::string& piece) const {
  auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int> Llama2cTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> tokens;
  if (add_bos) tokens.push_back(kBosId);
  // Byte fallback for a sequence of bytes that is not a piece: one token per byte.
  auto push_piece_or_bytes = [&](std::string_view s) {
    int id = lookup(std::string(s));
    if (id >= 0) {
      tokens.push_back(id);
      return;
    }
    for (unsigned char b : s) tokens.push_back(b + kByteFallbackOffset);
  };
  if (!text.empty()) push_piece_or_bytes(" ");  // the dummy prefix

  // Split into code points the way run.c does: a lead byte starts a new one, and continuation
  // bytes (10xxxxxx) join it, up to 4 bytes. Invalid UTF-8 thus falls back to bytes, never fails.
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 1;
    while (pos + len < text.size() && len < 4 && (uint8_t(text[pos + len]) & 0xC0) == 0x80) ++len;
    push_piece_or_bytes(text.substr(pos, len));
    pos += len;
  }

  // Merge loop. run.c rescans all pairs after each merge (O(n²)); here a heap keeps the pairs by
  // (score high→low, position left→right), which picks the same pair each step. Tokens form a
  // linked list; a merge folds the right token into the left; entries whose tokens changed since
  // they were pushed are stale and skipped.
  struct Candidate {
    float score;
    int left, left_id, right_id, merged;
    bool operator<(const Candidate& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  const int n = static_cast<int>(tokens.size());
  std::vector<int> next(n), prev(n);
  for (int i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
  std::priority_queue<Candidate> heap;
  auto push_pair = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    int right = next[left];
    int merged = lookup(pieces_[tokens[left]] + pieces_[tokens[right]]);
    if (merged >= 0 && scores_[merged] > kMinMergeScore)
      heap.push({scores_[merged], left, tokens[left], tokens[right], merged});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    if (tokens[c.left] != c.left_id || next[c.left] < 0 || tokens[next[c.left]] != c.right_id) continue;
    int right = next[c.left];
    tokens[c.left] = c.merged;
    tokens[right] = -1;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    push_pair(prev[c.left]);
    push_pair(c.left);
  }
  std::vector<int> out;
  for (int i = n > 0 ? 0 : -1; i >= 0; i = next[i]) out.push_back(tokens[i]);
  return out;
}

void Llama2cTokenizer::check_id(int id) const {
  if (id < 0 || id >= vocab_size())
    throw_input_error(file_, fmt::format("token id {} is not in the vocabulary (ids 0..{})", id, vocab_size() - 1));
}

std::string Llama2cTokenizer::decode_token(int prev, int id) const {
  check_id(id);
  // BOS and EOS mark sequence boundaries; they are not text. (run.c never prints BOS: generation
  // stops there. Their pieces "\n<s>\n" and "\n</s>\n" would only put noise in decoded text.)
  if (id == kBosId || id == kEosId) return "";
  const std::string& p = pieces_[id];
  if (prev == kBosId && !p.empty() && p[0] == ' ') return p.substr(1);
  return decoded_[id];
}

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int expected_vocab_size) {
  return std::make_unique<Llama2cTokenizer>(path, expected_vocab_size);
}

}  // namespace orion
