// Tokenizer training: byte-pair encoding learned from text, written as a llama2.c tokenizer.bin or
// a Hugging Face tokenizer.json, so a small model gets a vocabulary sized for it (stories260K uses
// 512 tokens).
//
// BPE in one paragraph: start from an alphabet of small units; count every adjacent pair of units
// in the text; replace the most frequent pair everywhere by a new unit (a merge) and repeat until
// the vocabulary has the size asked for. The merges, in the order they were learned, are the
// tokenizer: encoding replays them on new text. Text is first cut into words by GPT-2's
// pre-tokeniser (gpt2_pretokenize.h: " the", " cat", "!", ...), so no merge crosses a word
// boundary, and only distinct words with their counts are kept — the whole corpus reduces to a
// table of maybe 10^5 words, and each merge only revisits the words that contain its pair.
//
// The two outputs use different alphabets, because their encoders start from different units:
//   hf (tokenizer.json)  byte-level, as GPT-2: the 256 bytes are the alphabet, so any text encodes;
//                        ids 0..255 are the bytes, then one id per merge, and <|endoftext|> last.
//   llama2c (tokenizer.bin) as Llama's SentencePiece BPE with byte fallback: ids 0..2 are <unk>,
//                        BOS, EOS; 3..258 the byte pieces <0x00>..<0xFF>; then the merged pieces
//                        (score −k for merge k, so llama2.c's encoder, which merges the pair whose
//                        result has the highest score, replays them in training order); then the
//                        single characters kept as the alphabet (the most frequent ones, covering
//                        99.99% of the text; rarer characters fall back to their bytes and never
//                        merge). Words are counted with SentencePiece's dummy prefix: a space is put
//                        before each document, as the encoder does.
// Ties between equally frequent pairs go to the smaller (left id, right id): results do not depend
// on the thread count, the machine or hash-table order.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace orion::data {

class DocumentStream;

// Word counts of a corpus (GPT-2 pre-tokeniser pieces), and of the first word of each document
// (which the llama2.c flavour counts with a leading space instead).
struct WordCounts {
  std::unordered_map<std::string, uint64_t> words;
  std::unordered_map<std::string, uint64_t> first_words;
  uint64_t documents = 0, bytes = 0;
};

// Reads every document of the stream and counts its words, with `threads` threads (0: all cores).
WordCounts count_words(DocumentStream& docs, int threads, bool progress);

enum class TokenizerFormat { Llama2c, HfJson };

struct BpeTrainOptions {
  int vocab_size = 512;           // total ids, specials and byte tokens included
  double char_coverage = 0.9999;  // llama2c: share of characters the kept alphabet must cover
};

struct TrainedTokenizer {
  TokenizerFormat format = TokenizerFormat::Llama2c;
  // id → the raw bytes of the token (llama2c: the piece as stored, "<0x41>" for byte tokens and
  // "\n<s>\n" for BOS as llama2.c's export writes them; hf: the bytes, "<|endoftext|>" last).
  std::vector<std::string> tokens;
  std::vector<float> scores;                // llama2c: merge priority per id
  std::vector<std::pair<int, int>> merges;  // hf: (left id, right id) in rank order
  int n_merged = 0;                         // tokens made by merges
  int n_chars = 0;                          // llama2c: single-character pieces kept
};

// Learns the vocabulary. An Input error when the text cannot fill vocab_size ids (too little text)
// or when vocab_size is below the format's fixed part (llama2c: 259 + 1, hf: 257).
TrainedTokenizer train_bpe(const WordCounts& counts, TokenizerFormat format, const BpeTrainOptions& opt);

// Writers (bpe_export.cpp), through write_file_atomic; both load with load_tokenizer().
void write_llama2c_tokenizer(const std::string& path, const TrainedTokenizer& t);
void write_hf_tokenizer_json(const std::string& path, const TrainedTokenizer& t);

}  // namespace orion::data
