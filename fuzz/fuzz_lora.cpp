// LoRA adapter files (model/lora/lora_io): adapter.olora against a fixed tiny Llama base. The body
// has a checksum, so most inputs get a correct one written in first (as fuzz_checkpoint does).
#include <cstring>

#include "model/lora/lora_io.h"
#include "support.h"

namespace {
// lora_io.cpp's checksum (FNV-1a over 8-byte words, then the tail), which it keeps private.
uint64_t fnv_words(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
}  // namespace

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
    uint64_t sum = fnv_words(reinterpret_cast<const uint8_t*>(bytes.data()) + 32, size - 32);
    std::memcpy(bytes.data() + 24, &sum, sizeof sum);
  }
  std::string path = fuzz::write_scratch("adapter.olora", bytes);
  fuzz::expect_clean([&] { load_lora(path, base); });
  return 0;
}
