// MILBlob v2 weight files (compiler/blob): the validated view, then every blob it lists is read.
#include "compiler/blob/blob_file.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  fuzz::expect_clean([&] {
    compiler::blob::BlobFile file(data, size, "fuzz.bin");
    volatile uint64_t sum = 0;
    for (const auto& e : file.entries()) {
      const auto& again = file.at(e.record_offset);
      for (uint8_t b : file.copy(again)) sum += b;
    }
    file.at(size + 1);  // an offset that names no record: must be an error, not a read
  });
  return 0;
}
