// Training checkpoints (train/checkpoint, ORIONCKP v1) . A checksum guards the
// body, so most inputs get a correct checksum written in before reading (else every mutation past
// the header would stop at the checksum check); inputs whose size is 3 mod 4 keep theirs.
#include <cstring>

#include "support.h"
#include "train/loop/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size >= 32 && size % 4 != 3) {
    uint64_t sum = train::checkpoint_hash(bytes.data() + 32, size - 32);
    std::memcpy(bytes.data() + 24, &sum, sizeof sum);
  }
  std::string path = fuzz::write_scratch(train::checkpoint_name(7), bytes);
  fuzz::expect_clean([&] { train::read_checkpoint(path); });
  return 0;
}
