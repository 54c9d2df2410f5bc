// What the tokenizer targets do with a tokenizer that loaded: encode text with ASCII, multi-byte
// UTF-8, a special token and an invalid byte, then decode the ids and every id of the vocabulary.
#pragma once
#include <memory>

#include "model/tokenizer/tokenizer.h"

namespace orion::fuzz {

inline void use_tokenizer(const Tokenizer& tok) {
  static const std::string kText = "Once upon a time, a tiny dragon said: \"h\xc3\xa9llo \xe2\x9c\xa8 \xf0\x9f\x90\x89\"<|endoftext|>\n\n\xff end";
  std::vector<int> ids = tok.encode(kText, true);
  volatile size_t n = tok.decode(ids).size();
  int limit = tok.vocab_size() < 4096 ? tok.vocab_size() : 4096;
  for (int id = 0; id < limit; id++) n += tok.decode_token(id == 0 ? -1 : id - 1, id).size();
  (void)n;
}

}  // namespace orion::fuzz
