// TinyStories JSON shards (data/tinystories_json): every story of the streamed array.
#include "data/tinystories_json.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("data00.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    data::TinyStoriesReader reader(path);
    std::string story;
    size_t stories = 0;
    while (reader.next(story))
      if (++stories > size + 1) std::abort();  // more stories than bytes: the reader is not advancing
  });
  return 0;
}
