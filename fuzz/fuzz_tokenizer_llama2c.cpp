// llama2.c tokenizer.bin (model/tokenizer/llama2c_tokenizer), then encode and decode with it.
#include "model/tokenizer/llama2c_tokenizer.h"
#include "support.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("tokenizer.bin", fuzz::as_text(data, size));
  fuzz::expect_clean([&] { fuzz::use_tokenizer(*load_llama2c_tokenizer(path)); });
  return 0;
}
