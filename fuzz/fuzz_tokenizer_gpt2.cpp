// GPT-2 byte-level BPE files (model/tokenizer/gpt2_bpe_files): "<vocab.json>\n--8<--\n<merges.txt>";
// without the marker the input is vocab.json and merges.txt is empty.
#include "model/tokenizer/gpt2_bpe.h"
#include "support.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string_view input = fuzz::as_text(data, size);
  size_t at = input.find(fuzz::kSplitMarker);
  std::string_view vocab = input.substr(0, at);
  std::string_view merges = at == std::string_view::npos ? "#version: 0.2\n" : input.substr(at + fuzz::kSplitMarker.size());
  std::string vocab_path = fuzz::write_scratch("vocab.json", vocab);
  std::string merges_path = fuzz::write_scratch("merges.txt", merges);
  fuzz::expect_clean([&] { fuzz::use_tokenizer(*load_gpt2_bpe(vocab_path, merges_path)); });
  return 0;
}
