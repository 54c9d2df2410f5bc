// llm.c GPT-2 checkpoints (model/io/llmc): 256 × int32 header, fp32 (v3) or bf16 (v5) parameters.
#include "model/io/model_io.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("gpt2.bin", fuzz::as_text(data, size));
  LoadOptions options;
  options.format = ModelFormat::LlmC;
  fuzz::expect_clean([&] { load_model(path, options); });
  return 0;
}
