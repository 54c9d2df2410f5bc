// Hugging Face tokenizer.json (model/tokenizer/hf_tokenizer_json.cpp: byte-level and SentencePiece-style BPE), then encode and decode.
#include "model/tokenizer/hf_tokenizer.h"
#include "support.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("tokenizer.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    auto tok = load_hf_tokenizer_json(path);
    fuzz::use_tokenizer(*tok);
    // What chat models add: their special tokens in text, NFD accents, digit runs, SentencePiece spaces.
    tok->encode("<|im_start|>user\n<s>[INST] cafe\xcc\x81 12345  \xe2\x96\x81x</s><|eot_id|>", true);
    (void)tok->token_id("<|im_end|>");
  });
  return 0;
}
