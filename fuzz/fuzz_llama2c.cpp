// llama2.c model files, version 0 (7 × int32 header) and version 1 ("ak42"), found by their first bytes.
#include "model/io/model_io.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("model.bin", fuzz::as_text(data, size));
  fuzz::expect_clean([&] { load_model(path); });
  return 0;
}
