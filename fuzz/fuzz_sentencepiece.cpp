// SentencePiece .model files (model/tokenizer/sentencepiece_tokenizer over libsentencepiece).
#include "model/tokenizer/sentencepiece_tokenizer.h"
#include "support.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("tokenizer.model", fuzz::as_text(data, size));
  fuzz::expect_clean([&] { fuzz::use_tokenizer(*load_sentencepiece(path)); });
  return 0;
}
