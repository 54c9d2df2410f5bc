// Pretokenized data (data/token_files): llama2.c shards and llm.c token files, opened with and
// without a vocabulary bound, then split into sequences.
#include "data/token_files.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("data.bin", fuzz::as_text(data, size));
  for (int vocab : {-1, 512, 50257}) {
    fuzz::expect_clean([&] {
      data::TokenFile f = data::open_token_file(path, vocab);
      int separator = f.format == data::TokenFormat::Llmc ? 50256 : 1;
      volatile size_t n = data::split_sequences(f.tokens, f.count, separator).size();
      (void)n;
    });
  }
  fuzz::expect_clean([&] { data::open_token_file(path, -1, data::TokenFormat::Llmc); });
  return 0;
}
