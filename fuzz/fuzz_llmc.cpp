// llm.c GPT-2 checkpoints (model/io/llmc): 256 × int32 header, fp32 (v3) or bf16 (v5) parameters.
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  orion::fuzz::expect_clean_model_load(orion::fuzz::as_text(data, size), "gpt2.bin", orion::ModelFormat::LlmC);
  return 0;
}
