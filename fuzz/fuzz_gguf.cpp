// llama.cpp GGUF models (model/io/gguf_file, gguf_model): header, typed metadata, tensor table,
// data — and the tokenizer in the metadata (model/tokenizer/gguf_tokenizer), read from the same bytes.
#include "model/tokenizer/tokenizer.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  fuzz::expect_clean_model_load(fuzz::as_text(data, size), "model.gguf", ModelFormat::Gguf);
  fuzz::expect_clean([] { load_tokenizer(fuzz::scratch_dir() + "/model.gguf"); });
  return 0;
}
