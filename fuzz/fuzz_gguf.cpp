// llama.cpp GGUF models (model/io/gguf_file, gguf_model): header, typed metadata, tensor table, data.
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  orion::fuzz::expect_clean_model_load(orion::fuzz::as_text(data, size), "model.gguf", orion::ModelFormat::Gguf);
  return 0;
}
