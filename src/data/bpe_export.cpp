// Writing a trained tokenizer in the two formats load_tokenizer() reads.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "data/bpe_trainer.h"
#include "model/tokenizer/gpt2_bpe.h"

namespace orion::data {

void write_llama2c_tokenizer(const std::string& path, const TrainedTokenizer& t) {
  ORION_CHECK(t.format == TokenizerFormat::Llama2c && t.tokens.size() == t.scores.size());
  int32_t max_len = 1;
  for (const auto& p : t.tokens) max_len = std::max(max_len, int32_t(p.size()));
  write_file_atomic(path, [&](FileWriter& w) {
    w.write_pod(max_len);
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      w.write_pod(t.scores[i]);
      w.write_pod(int32_t(t.tokens[i].size()));
      w.write_str(t.tokens[i]);
    }
  });
}

// A tokenizer.json as the Hugging Face `tokenizers` library writes one for GPT-2: a BPE model, the
// ByteLevel pre-tokeniser (GPT-2's regex, no prefix space) and decoder, <|endoftext|> as an added
// special token. Merges are "left right" strings (byte-level spellings never contain a space).
void write_hf_tokenizer_json(const std::string& path, const TrainedTokenizer& t) {
  ORION_CHECK(t.format == TokenizerFormat::HfJson && !t.tokens.empty());
  using nlohmann::json;
  const int eot = int(t.tokens.size()) - 1;
  json vocab = json::object();
  for (int id = 0; id < eot; ++id) vocab[gpt2_byte_level(t.tokens[id])] = id;
  vocab["<|endoftext|>"] = eot;
  json merges = json::array();
  for (const auto& [a, b] : t.merges) merges.push_back(gpt2_byte_level(t.tokens[a]) + " " + gpt2_byte_level(t.tokens[b]));
  json byte_level_step = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  json root = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", json::array({{{"id", eot},
                                              {"content", "<|endoftext|>"},
                                              {"single_word", false},
                                              {"lstrip", false},
                                              {"rstrip", false},
                                              {"normalized", false},
                                              {"special", true}}})},
               {"normalizer", nullptr},
               {"pre_tokenizer", byte_level_step},
               {"post_processor", byte_level_step},
               {"decoder", byte_level_step},
               {"model",
                {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"vocab", vocab},
                 {"merges", merges}}}};
  write_file_atomic(path, [&](FileWriter& w) { w.write_str(root.dump(1) + "\n"); });
}

}  // namespace orion::data
