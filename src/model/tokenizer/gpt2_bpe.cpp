#include "model/tokenizer/gpt2_bpe.h"

#include <algorithm>
#include <unordered_set>

#include "base/error.h"
#include "model/tokenizer/bpe_merge.h"
#include "model/tokenizer/gpt2_pretokenize.h"
#include "model/tokenizer/unicode.h"

namespace orion {
namespace {

// The raw bytes a byte-level token string stands for. A code point outside the byte table (which a
// well-formed byte-level vocabulary never has) is kept as its own UTF-8, so decoding never fails.
std::string token_string_to_bytes(const std::string& token, const std::unordered_map<uint32_t, uint8_t>& cp_to_byte) {
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    Utf8Char c = decode_utf8(token, pos);
    auto it = cp_to_byte.find(c.cp);
    if (it != cp_to_byte.end()) bytes += char(it->second);
    else bytes.append(token, pos, c.len);
    pos += c.len;
  }
  return bytes;
}

std::string merge_where(const Gpt2BpeSpec& spec, size_t i) {
  return spec.merge_lines.size() > i ? fmt::format("line {}", spec.merge_lines[i]) : fmt::format("merge {}", i);
}

}  // namespace

const std::array<uint32_t, 256>& gpt2_byte_to_codepoint() {
  // Bytes that are printable Latin-1 characters ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
  // themselves; the other 68 (controls, space, soft hyphen…) get U+0100, U+0101, … in byte order.
  // This keeps vocabulary files readable and free of whitespace and control characters.
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

std::string gpt2_byte_level(std::string_view bytes) {
  const auto& table = gpt2_byte_to_codepoint();
  std::string s;
  for (unsigned char b : bytes) append_utf8(s, table[b]);
  return s;
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const Gpt2BpeSpec& spec)
    : file_(spec.vocab_file), special_(spec.special), add_prefix_space_(spec.add_prefix_space) {
  if (spec.vocab.empty()) throw_input_error(spec.vocab_file, "the vocabulary is empty");
  std::unordered_map<std::string, int> ids;
  int max_id = -1;
  for (const auto& [token, id] : spec.vocab) {
    if (id < 0 || id > 10'000'000) throw_input_error(spec.vocab_file, fmt::format("token id {} is out of range", id), token);
    ids.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  for (const auto& [text, id] : spec.special) {
    if (id < 0 || id > 10'000'000)
      throw_input_error(spec.vocab_file, fmt::format("special token id {} is out of range", id), text);
    max_id = std::max(max_id, id);
  }

  // Every byte needs its one-byte token, or some text could not be encoded at all.
  const auto& byte_cp = gpt2_byte_to_codepoint();
  std::unordered_map<uint32_t, uint8_t> cp_to_byte;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(s, byte_cp[b]);
    auto it = ids.find(s);
    if (it == ids.end())
      throw_input_error(spec.vocab_file, fmt::format("the vocabulary has no token for byte 0x{:02X} ('{}')", b, s), {}, -1,
                        "a byte-level BPE vocabulary must hold all 256 byte tokens");
    byte_token_[b] = it->second;
    cp_to_byte[byte_cp[b]] = uint8_t(b);
  }

  token_bytes_.assign(max_id + 1, {});
  has_token_.assign(max_id + 1, false);
  for (const auto& [token, id] : spec.vocab) {
    token_bytes_[id] = token_string_to_bytes(token, cp_to_byte);
    has_token_[id] = true;
  }
  for (const auto& [text, id] : spec.special) {
    token_bytes_[id] = text;
    has_token_[id] = true;
    if (text == "<|endoftext|>") eos_id_ = id;
  }
  if (eos_id_ < 0) {
    auto it = ids.find("<|endoftext|>");
    if (it != ids.end()) eos_id_ = it->second;
  }

  merges_ = build_merge_table(spec.merges, ids, [&](size_t r, const std::string& missing) {
    const auto& [left, right] = spec.merges[r];
    throw_input_error(spec.merges_file,
                      fmt::format("merge '{} {}' names the token '{}', which is not in the vocabulary ({})", left, right,
                                  missing, spec.vocab_file),
                      merge_where(spec, r), -1, "the merges and the vocabulary must come from the same tokenizer");
  });
}

void Gpt2BpeTokenizer::bpe(std::string_view word, std::vector<int>& out) const {
  std::vector<int> ids(word.size());
  for (size_t i = 0; i < word.size(); ++i) ids[i] = byte_token_[uint8_t(word[i])];
  bpe_merge(ids, merges_);
  out.insert(out.end(), ids.begin(), ids.end());
}

void Gpt2BpeTokenizer::encode_word(std::string_view word, std::vector<int>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_token_[uint8_t(word[0])]);
    return;
  }
  std::string key(word);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int> ids;
  bpe(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cache_.size() > 200'000) cache_.clear();  // bound the memory a huge varied input can take
  cache_.emplace(std::move(key), std::move(ids));
}

void Gpt2BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int>& out) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  for (size_t pos = 0; pos < text.size();) {
    size_t end = gpt2_piece_end(text, pos);
    encode_word(text.substr(pos, end - pos), out);
    pos = end;
  }
}

std::vector<int> Gpt2BpeTokenizer::encode(std::string_view text, bool /*add_bos: GPT-2 has no BOS*/) const {
  std::vector<int> out;
  out.reserve(text.size() / 3 + 4);
  std::string prefixed;
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  // Cut out the special tokens: at each step find the earliest occurrence of any special text
  // (the longest one if several start there). next_at caches each special's next occurrence.
  constexpr size_t npos = std::string_view::npos;
  std::vector<size_t> next_at(special_.size());
  for (size_t k = 0; k < special_.size(); ++k) next_at[k] = special_[k].first.empty() ? npos : text.find(special_[k].first);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = npos, best_len = 0;
    int best_id = -1;
    for (size_t k = 0; k < special_.size(); ++k) {
      const std::string& s = special_[k].first;
      if (next_at[k] < pos) next_at[k] = text.find(s, pos);  // consumed or overlapped: look again
      if (next_at[k] < best || (next_at[k] == best && best != npos && s.size() > best_len)) {
        best = next_at[k];
        best_len = s.size();
        best_id = special_[k].second;
      }
    }
    if (best == std::string_view::npos) best = text.size();
    encode_ordinary(text.substr(pos, best - pos), out);
    if (best == text.size()) break;
    out.push_back(best_id);
    pos = best + best_len;
  }
  return out;
}

std::string Gpt2BpeTokenizer::decode_token(int /*prev*/, int id) const {
  if (id < 0 || id >= vocab_size() || !has_token_[id])
    throw_input_error(file_, fmt::format("token id {} is not in the vocabulary (ids 0..{})", id, vocab_size() - 1));
  return token_bytes_[id];
}

}  // namespace orion
