// Hugging Face tokenizer.json (byte-level BPE; model/tokenizer/gpt2_bpe_files), then encode and decode.
#include "model/tokenizer/gpt2_bpe.h"
#include "support.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("tokenizer.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] { fuzz::use_tokenizer(*load_hf_tokenizer_json(path)); });
  return 0;
}
