// Plain-text documents (data/text_documents): every document of the file.
#include "data/text_documents.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string path = fuzz::write_scratch("stories.txt", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    data::TextDocumentReader reader(path);
    std::string doc;
    size_t docs = 0;
    while (reader.next(doc))
      if (++docs > size + 1) std::abort();  // more documents than bytes: the reader is not advancing
  });
  return 0;
}
