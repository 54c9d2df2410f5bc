// llama2.c model files, version 0 (7 × int32 header) and version 1 ("ak42"), found by their first bytes.
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  orion::fuzz::expect_clean_model_load(orion::fuzz::as_text(data, size), "model.bin", std::nullopt);
  return 0;
}
