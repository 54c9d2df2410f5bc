// LoRA adapter files (model/lora/lora_io): adapter.olora against a fixed tiny Llama base. The body
// has a checksum, so most inputs get a correct one written in first (as fuzz_checkpoint does).
#include <cstring>

#include "model/lora/lora_io.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  static const ModelConfig base = [] {
    ModelConfig c;
    c.arch = Arch::Llama;
    c.dim = 8, c.hidden_dim = 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1;
    c.vocab_size = c.padded_vocab = 16, c.seq_len = 8;
    return c;
  }();
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size >= 32 && size % 4 != 3) {
    uint64_t sum = lora_file_checksum(reinterpret_cast<const uint8_t*>(bytes.data()) + 32, size - 32);
    std::memcpy(bytes.data() + 24, &sum, sizeof sum);
  }
  std::string path = fuzz::write_scratch("adapter.olora", bytes);
  fuzz::expect_clean([&] { load_lora(path, base); });
  return 0;
}
