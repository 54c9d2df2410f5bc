// Word counting (parallel) and the merge loop of BPE training.
#include "data/bpe_trainer.h"

#include <omp.h>

#include <algorithm>
#include <queue>

#include "base/error.h"
#include "data/document_stream.h"
#include "data/progress.h"
#include "model/tokenizer/gpt2_pretokenize.h"

namespace orion::data {
namespace {

using Counts = std::unordered_map<std::string, uint64_t>;
constexpr size_t kChunkDocuments = 4096;
constexpr int kLlama2cFixed = 3 + 256;  // <unk> <s> </s> and the byte pieces

void count_document(std::string_view doc, Counts& words, Counts& first) {
  // Stripped as `orion data prepare` strips documents before encoding them.
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!doc.empty() && space(doc.front())) doc.remove_prefix(1);
  while (!doc.empty() && space(doc.back())) doc.remove_suffix(1);
  for (size_t pos = 0; pos < doc.size();) {
    const size_t end = gpt2_piece_end(doc, pos);
    std::string piece(doc.substr(pos, end - pos));
    if (pos == 0) ++first[piece];
    ++words[std::move(piece)];
    pos = end;
  }
}

// The length of the character starting at pos, grouped as llama2.c's encoder groups bytes: a
// byte and up to three continuation bytes (10xxxxxx) after it.
size_t char_len(std::string_view s, size_t pos) {
  size_t len = 1;
  while (pos + len < s.size() && len < 4 && (uint8_t(s[pos + len]) & 0xC0) == 0x80) ++len;
  return len;
}

struct Word {
  std::vector<int> syms;
  uint64_t count;
};

uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// The merge loop. `tokens` holds the alphabet (id → bytes) on entry and grows by one per new merged
// token until it has `target` entries; `merges` receives every merge in order.
void learn_merges(std::vector<Word>& words, std::vector<std::string>& tokens, size_t target,
                  std::vector<std::pair<int, int>>& merges) {
  struct Candidate {
    uint64_t count;
    int a, b;
    bool operator<(const Candidate& o) const {  // priority: higher count, then smaller (a, b)
      if (count != o.count) return count < o.count;
      return a != o.a ? a > o.a : b > o.b;
    }
  };
  std::unordered_map<std::string, int> index;
  for (size_t i = 0; i < tokens.size(); ++i) index.emplace(tokens[i], int(i));
  std::unordered_map<uint64_t, uint64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;  // pair → words holding it (may repeat)
  for (uint32_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].syms.size(); ++i) {
      const uint64_t k = pair_key(words[w].syms[i], words[w].syms[i + 1]);
      pair_count[k] += words[w].count;
      where[k].push_back(w);
    }
  std::priority_queue<Candidate> heap;
  for (const auto& [k, c] : pair_count) heap.push({c, int(k >> 32), int(uint32_t(k))});

  while (tokens.size() < target) {
    if (heap.empty())
      throw_input_error("training text",
                        fmt::format("the text only has enough distinct pairs for {} of the {} tokens asked for",
                                    tokens.size(), target),
                        "--vocab", -1, "use a smaller --vocab or more text");
    const Candidate top = heap.top();
    heap.pop();
    const uint64_t key = pair_key(top.a, top.b);
    auto pc = pair_count.find(key);
    if (pc == pair_count.end() || pc->second != top.count) continue;  // stale entry
    // The new token; a string learned before through another pair keeps its id.
    const std::string s = tokens[top.a] + tokens[top.b];
    auto [it, fresh] = index.emplace(s, int(tokens.size()));
    if (fresh) tokens.push_back(s);
    const int m = it->second;
    merges.emplace_back(top.a, top.b);

    std::vector<uint32_t> list = std::move(where[key]);
    where.erase(key);
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    std::unordered_map<uint64_t, int64_t> delta;
    for (uint32_t wi : list) {
      Word& w = words[wi];
      std::vector<int>& v = w.syms;
      std::vector<int> merged;
      merged.reserve(v.size());
      bool changed = false;
      for (size_t i = 0; i < v.size(); ++i) {
        if (i + 1 < v.size() && v[i] == top.a && v[i + 1] == top.b) {
          merged.push_back(m);
          ++i;
          changed = true;
        } else {
          merged.push_back(v[i]);
        }
      }
      if (!changed) continue;
      for (size_t i = 0; i + 1 < v.size(); ++i) delta[pair_key(v[i], v[i + 1])] -= int64_t(w.count);
      for (size_t i = 0; i + 1 < merged.size(); ++i) {
        const uint64_t k = pair_key(merged[i], merged[i + 1]);
        delta[k] += int64_t(w.count);
        if (merged[i] == m || merged[i + 1] == m) where[k].push_back(wi);
      }
      v.swap(merged);
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      const uint64_t c = pair_count[k] += uint64_t(d);
      if (c == 0) pair_count.erase(k);
      else heap.push({c, int(k >> 32), int(uint32_t(k))});
    }
  }
}

// Words sorted by text, so that training never depends on hash-table order.
std::vector<std::pair<std::string, uint64_t>> sorted_words(const Counts& c) {
  std::vector<std::pair<std::string, uint64_t>> v(c.begin(), c.end());
  std::sort(v.begin(), v.end());
  return v;
}

TrainedTokenizer train_byte_level(const WordCounts& counts, const BpeTrainOptions& opt) {
  if (opt.vocab_size < 257)
    throw_usage_error(fmt::format("--vocab {} is below 257 (256 bytes + <|endoftext|>)", opt.vocab_size), "--vocab");
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, char(b));
  std::vector<Word> words;
  for (auto& [text, n] : sorted_words(counts.words)) {
    Word w{{}, n};
    for (unsigned char c : text) w.syms.push_back(c);
    words.push_back(std::move(w));
  }
  TrainedTokenizer t;
  t.format = TokenizerFormat::HfJson;
  learn_merges(words, tokens, size_t(opt.vocab_size - 1), t.merges);
  t.n_merged = int(tokens.size()) - 256;
  tokens.push_back("<|endoftext|>");
  t.tokens = std::move(tokens);
  return t;
}

// The llama2.c flavour: words with the dummy prefix, an alphabet of frequent characters.
TrainedTokenizer train_llama2c(const WordCounts& counts, const BpeTrainOptions& opt) {
  if (opt.vocab_size < kLlama2cFixed + 1)
    throw_usage_error(fmt::format("--vocab {} is below {} (3 specials + 256 byte pieces + the space piece)", opt.vocab_size,
                                  kLlama2cFixed + 1),
                      "--vocab");
  // The first word of each document is seen by the encoder after its dummy-prefix space.
  Counts words = counts.words;
  for (const auto& [w, n] : counts.first_words) {
    if ((words[w] -= n) == 0) words.erase(w);
    words[" " + w] += n;
  }
  const auto sorted = sorted_words(words);

  // Alphabet: characters by frequency (ties: byte order), until the coverage is reached or the
  // budget is spent. The space is always kept: the dummy prefix must be a piece.
  Counts chars;
  uint64_t total = 0;
  for (const auto& [w, n] : sorted)
    for (size_t p = 0; p < w.size(); p += char_len(w, p)) chars[w.substr(p, char_len(w, p))] += n, total += n;
  auto by_freq = sorted_words(chars);
  std::stable_sort(by_freq.begin(), by_freq.end(), [](auto& x, auto& y) { return x.second > y.second; });
  const size_t budget = size_t(opt.vocab_size - kLlama2cFixed);
  std::vector<std::string> tokens{" "};
  uint64_t covered = chars.count(" ") ? chars[" "] : 0;
  for (const auto& [c, n] : by_freq) {
    if (tokens.size() >= budget || double(covered) >= opt.char_coverage * double(total)) break;
    if (c != " ") tokens.push_back(c), covered += n;
  }
  const int n_chars = int(tokens.size());
  std::unordered_map<std::string, int> char_id;
  for (int i = 0; i < n_chars; ++i) char_id.emplace(tokens[i], i);

  // Words as characters; a character outside the alphabet becomes byte-fallback tokens in the
  // encoder, which never merge, so it splits the word.
  std::vector<Word> units;
  for (const auto& [w, n] : sorted) {
    Word cur{{}, n};
    for (size_t p = 0; p < w.size(); p += char_len(w, p)) {
      auto it = char_id.find(w.substr(p, char_len(w, p)));
      if (it != char_id.end()) {
        cur.syms.push_back(it->second);
      } else if (!cur.syms.empty()) {
        units.push_back(std::move(cur));
        cur = Word{{}, n};
      }
    }
    if (cur.syms.size() > 1) units.push_back(std::move(cur));
  }
  std::vector<std::pair<int, int>> merges;
  learn_merges(units, tokens, budget, merges);

  TrainedTokenizer t;
  t.format = TokenizerFormat::Llama2c;
  t.n_chars = n_chars;
  t.n_merged = int(tokens.size()) - n_chars;
  t.tokens = {"<unk>", "\n<s>\n", "\n</s>\n"};
  t.scores.assign(3, 0.0f);
  for (int b = 0; b < 256; ++b) t.tokens.push_back(fmt::format("<0x{:02X}>", b)), t.scores.push_back(0.0f);
  for (int k = 0; k < t.n_merged; ++k) t.tokens.push_back(tokens[n_chars + k]), t.scores.push_back(-float(k));
  for (int c = 0; c < n_chars; ++c) t.tokens.push_back(tokens[c]), t.scores.push_back(-float(t.n_merged + c));
  return t;
}

}  // namespace

WordCounts count_words(DocumentStream& docs, int threads, bool progress_on) {
  const int n_threads = threads > 0 ? threads : omp_get_num_procs();
  std::vector<Counts> words(n_threads), first(n_threads);
  WordCounts out;
  Progress progress("count words", "docs", docs.bytes_total(), progress_on);
  std::vector<std::string> chunk;
  for (bool more = true; more;) {
    chunk.clear();
    std::string doc;
    while (chunk.size() < kChunkDocuments && (more = docs.next(doc))) chunk.push_back(std::move(doc));
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 64)
    for (size_t i = 0; i < chunk.size(); ++i) {
      const int t = omp_get_thread_num();
      count_document(chunk[i], words[t], first[t]);
    }
    for (const auto& d : chunk) out.bytes += d.size();
    out.documents += chunk.size();
    progress.update(out.documents, docs.bytes_done());
  }
  for (int t = 0; t < n_threads; ++t) {
    for (auto& [w, n] : words[t]) out.words[w] += n;
    for (auto& [w, n] : first[t]) out.first_words[w] += n;
  }
  progress.finish(out.documents, docs.bytes_done());
  return out;
}

TrainedTokenizer train_bpe(const WordCounts& counts, TokenizerFormat format, const BpeTrainOptions& opt) {
  if (opt.vocab_size > 65536)
    throw_usage_error(fmt::format("--vocab {} is above 65536 (token files store uint16 ids)", opt.vocab_size), "--vocab");
  return format == TokenizerFormat::HfJson ? train_byte_level(counts, opt) : train_llama2c(counts, opt);
}

}  // namespace orion::data
