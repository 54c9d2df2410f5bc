#include "model/tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "base/error.h"
#include "model/tokenizer/unicode.h"

namespace orion {
namespace {

constexpr int kMaxId = 10'000'000;
constexpr int kUnknownChar = -2;  // a character without a token, while BPE runs (never merges)

// A run of the input: plain text, or an added token (added >= 0: its index in spec.added).
struct Section {
  std::string text;
  int added = -1;
};

// Finds added tokens in text: at each position the longest token that starts there, scanning left
// to right (Hugging Face's leftmost-longest matching). Tokens are bucketed by first byte.
class AddedTokenMatcher {
 public:
  void add(const std::string& content, int index) {
    if (content.empty()) return;
    auto& bucket = by_first_byte_[uint8_t(content[0])];
    bucket.emplace_back(content, index);
    std::stable_sort(bucket.begin(), bucket.end(), [](auto& a, auto& b) { return a.first.size() > b.first.size(); });
    empty_ = false;
  }

  std::vector<Section> cut(const std::string& text) const {
    if (empty_) return {Section{text}};
    std::vector<Section> out;
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      const auto* hit = longest_at(text, i);
      if (!hit) {
        ++i;
        continue;
      }
      if (i > start) out.push_back({text.substr(start, i - start)});
      out.push_back({hit->first, hit->second});
      i += hit->first.size();
      start = i;
    }
    if (start < text.size()) out.push_back({text.substr(start)});
    return out;
  }

 private:
  const std::pair<std::string, int>* longest_at(const std::string& text, size_t i) const {
    for (const auto& t : by_first_byte_[uint8_t(text[i])])
      if (text.compare(i, t.first.size(), t.first) == 0) return &t;
    return nullptr;
  }
  std::array<std::vector<std::pair<std::string, int>>, 256> by_first_byte_;
  bool empty_ = true;
};

bool is_space_at(const std::string& s, size_t pos, int* len) {
  Utf8Char c = decode_utf8(s, pos);
  *len = c.len;
  return c.cp != kInvalidCodepoint && char_class(c.cp) == CharClass::Space;
}

void trim_start(std::string& s) {
  size_t pos = 0;
  int len = 0;
  while (pos < s.size() && is_space_at(s, pos, &len)) pos += len;
  s.erase(0, pos);
}

void trim_end(std::string& s) {
  size_t keep = 0;  // the end of the last non-space character
  int len = 0;
  for (size_t pos = 0; pos < s.size(); pos += len)
    if (!is_space_at(s, pos, &len)) keep = pos + len;
  s.resize(keep);
}

// lstrip / rstrip: an added token takes the whitespace beside it from its neighbours.
void strip_around_added(std::vector<Section>& sections, const std::vector<HfAddedToken>& added) {
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].added < 0) continue;
    const HfAddedToken& t = added[sections[i].added];
    if (t.lstrip && i > 0 && sections[i - 1].added < 0) trim_end(sections[i - 1].text);
    if (t.rstrip && i + 1 < sections.size() && sections[i + 1].added < 0) trim_start(sections[i + 1].text);
  }
}

std::string byte_token_name(int b) { return fmt::format("<0x{:02X}>", b); }

}  // namespace

// The matchers live beside the spec; built once in the constructor.
struct HfMatchers {
  AddedTokenMatcher raw, normalized;
};

HfBpeTokenizer::HfBpeTokenizer(HfTokenizerSpec spec) : spec_(std::move(spec)) {
  const std::string& file = spec_.file;
  int max_id = -1;
  std::unordered_map<int, std::string> owner;  // id → the token that has it (duplicates are errors)
  for (const auto& [token, id] : spec_.vocab) {
    if (id < 0 || id > kMaxId) throw_input_error(file, fmt::format("token '{}' has id {}, out of range", token, id), "model.vocab");
    auto [it, fresh] = owner.emplace(id, token);
    if (!fresh)
      throw_input_error(file, fmt::format("tokens '{}' and '{}' have the same id {}", it->second, token, id), "model.vocab",
                        -1, "each id must name one token");
    ids_.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  std::unordered_map<int, size_t> added_at;  // id → its index in added_tokens
  for (size_t i = 0; i < spec_.added.size(); ++i) {
    const HfAddedToken& t = spec_.added[i];
    const std::string field = fmt::format("added_tokens[{}]", i);
    if (t.id < 0 || t.id > kMaxId) throw_input_error(file, fmt::format("id {} is out of range", t.id), field);
    if (t.content.empty()) throw_input_error(file, "the content is empty", field);
    auto [it, fresh] = added_at.emplace(t.id, i);
    if (!fresh)
      throw_input_error(file, fmt::format("id {} is also added_tokens[{}]", t.id, it->second), field, -1,
                        "each added token needs its own id");
    max_id = std::max(max_id, t.id);
  }

  tokens_.assign(max_id + 1, {});
  has_token_.assign(max_id + 1, false);
  is_added_.assign(max_id + 1, false);
  for (const auto& [token, id] : spec_.vocab) tokens_[id] = token, has_token_[id] = true;
  for (const auto& t : spec_.added) {
    tokens_[t.id] = t.content, has_token_[t.id] = true, is_added_[t.id] = true;
    added_ids_.emplace(t.content, t.id);  // the first of two equal contents wins, as in the matcher
  }

  merges_ = build_merge_table(spec_.merges, ids_, [&](size_t r, const std::string& missing) {
    const auto& [left, right] = spec_.merges[r];
    throw_input_error(file, fmt::format("merge '{} {}' names the token '{}', which is not in the vocabulary", left, right, missing),
                      fmt::format("model.merges[{}]", r), -1, "the merges and the vocabulary must come from the same tokenizer");
  });

  byte_tokens_.fill(-1);
  for (int b = 0; b < 256; ++b)
    if (auto it = ids_.find(byte_token_name(b)); it != ids_.end()) byte_tokens_[b] = it->second;
  if (spec_.unk_token) {
    auto id = token_id(*spec_.unk_token);
    if (!id) throw_input_error(file, fmt::format("unk_token '{}' is not in the vocabulary", *spec_.unk_token), "model.unk_token");
    unk_id_ = *id;
  }
  resolve_bos_eos();

  matchers_ = std::make_shared<HfMatchers>();
  for (size_t i = 0; i < spec_.added.size(); ++i) {
    const HfAddedToken& t = spec_.added[i];
    if (t.normalized && !spec_.normalizer.empty()) matchers_->normalized.add(hf_normalize(spec_.normalizer, t.content), int(i));
    else matchers_->raw.add(t.content, int(i));
  }
}

// bos/eos: tokenizer_config.json names them; without one, the template's first token is the BOS
// and the usual end tokens are looked up (GPT-2's <|endoftext|>, SentencePiece's </s>).
void HfBpeTokenizer::resolve_bos_eos() {
  auto id_of = [&](const std::optional<std::string>& name, const char* field) {
    if (!name) return -1;
    auto id = token_id(*name);
    if (!id) throw_input_error(spec_.config_file, fmt::format("'{}' is not a token of {}", *name, spec_.file), field);
    return *id;
  };
  if (spec_.has_config) {
    bos_id_ = id_of(spec_.bos_token, "bos_token");
    eos_id_ = id_of(spec_.eos_token, "eos_token");
    return;
  }
  if (!spec_.template_before.empty()) bos_id_ = spec_.template_before.front();
  for (const char* name : {"<|endoftext|>", "</s>"})
    if (auto id = token_id(name); id && eos_id_ < 0) eos_id_ = *id;
}

std::optional<int> HfBpeTokenizer::token_id(std::string_view token) const {
  const std::string key(token);
  if (auto it = added_ids_.find(key); it != added_ids_.end()) return it->second;
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  return std::nullopt;
}

void HfBpeTokenizer::bpe(const std::string& word, std::vector<int>& out) const {
  std::vector<int> ids;
  std::vector<std::string_view> unknown;  // the characters without a token, in order
  for (size_t pos = 0; pos < word.size();) {
    Utf8Char c = decode_utf8(word, pos);
    std::string_view ch(word.data() + pos, c.len);
    auto it = ids_.find(std::string(ch));
    if (it != ids_.end()) {
      ids.push_back(it->second);
    } else {
      ids.push_back(kUnknownChar);
      unknown.push_back(ch);
    }
    pos += c.len;
  }
  bpe_merge(ids, merges_);
  size_t next_unknown = 0;
  for (int id : ids) {
    if (id != kUnknownChar) {
      out.push_back(id);
      continue;
    }
    std::string_view ch = unknown[next_unknown++];
    // Byte fallback: the character's UTF-8 bytes as <0xNN> tokens, when the vocabulary has them all.
    bool all_bytes = spec_.byte_fallback;
    for (unsigned char b : ch) all_bytes = all_bytes && byte_tokens_[b] >= 0;
    if (all_bytes) {
      for (unsigned char b : ch) out.push_back(byte_tokens_[b]);
    } else if (unk_id_ >= 0 && !(spec_.fuse_unk && !out.empty() && out.back() == unk_id_)) {
      out.push_back(unk_id_);
    }
  }
}

void HfBpeTokenizer::encode_word(const std::string& word, std::vector<int>& out) const {
  if (word.empty()) return;
  if (spec_.ignore_merges)
    if (auto id = token_id(word)) {
      out.push_back(*id);
      return;
    }
  // Words repeat, so short ones are cached. Long ones are not: a SentencePiece-style file without a
  // splitting pre-tokenizer makes a whole section one word.
  if (word.size() > 256) return bpe(word, out);
  auto it = cache_.find(word);
  if (it == cache_.end()) {
    std::vector<int> ids;
    bpe(word, ids);
    if (cache_.size() > 200'000) cache_.clear();  // bound the memory a huge varied input can take
    it = cache_.emplace(word, std::move(ids)).first;
  }
  out.insert(out.end(), it->second.begin(), it->second.end());
}

// One section between raw-matched added tokens: normalize, look for normalized added tokens,
// pre-tokenize the rest into words, BPE each word.
void HfBpeTokenizer::encode_section(const std::string& text, int section_index, std::vector<int>& out) const {
  std::string normalized = hf_normalize(spec_.normalizer, text);
  std::vector<Section> parts = matchers_->normalized.cut(normalized);
  strip_around_added(parts, spec_.added);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  for (const Section& p : parts) {
    if (p.added >= 0) {
      out.push_back(spec_.added[p.added].id);
      continue;
    }
    if (p.text.empty()) continue;
    for (const std::string& word : hf_pre_tokenize(spec_.pre_tokenizer, p.text, section_index)) encode_word(word, out);
  }
}

std::vector<int> HfBpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> ids;
  std::vector<Section> sections = matchers_->raw.cut(std::string(text));
  strip_around_added(sections, spec_.added);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].added >= 0) ids.push_back(spec_.added[sections[i].added].id);
    else if (!sections[i].text.empty()) encode_section(sections[i].text, int(i), ids);
  }
  if (!add_bos) return ids;
  if (spec_.has_template) {
    std::vector<int> out = spec_.template_before;
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), spec_.template_after.begin(), spec_.template_after.end());
    return out;
  }
  if (spec_.add_bos_token && bos_id_ >= 0) ids.insert(ids.begin(), bos_id_);
  if (spec_.add_eos_token && eos_id_ >= 0) ids.push_back(eos_id_);
  return ids;
}

std::string HfBpeTokenizer::decode_token(int prev, int id) const {
  if (id < 0 || id >= vocab_size() || !has_token_[id])
    throw_input_error(spec_.file, fmt::format("token id {} is not in the vocabulary (ids 0..{})", id, vocab_size() - 1));
  return hf_decode_token(spec_.decoder, tokens_[id], prev < 0, is_added_[id]);
}

}  // namespace orion
