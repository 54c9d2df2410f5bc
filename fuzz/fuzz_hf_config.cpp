// Hugging Face config.json (model/io/hf_config) on its own.
#include "model/io/io_internal.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("config.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    ModelConfig c = io::read_hf_config(path);
    volatile size_t n = c.num_params();
    (void)n;
  });
  return 0;
}
