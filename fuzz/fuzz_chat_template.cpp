// Chat templates (model/chat): a tokenizer_config.json's chat_template is downloaded text that
// Orion parses and runs. The input is the template source; it is parsed and rendered over a small
// conversation. Errors must be orion::Errors; loops, repetition and nesting are bounded.
#include "model/chat/chat_template.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  const std::string source(fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    chat::ChatTemplate t(source, "chat_template", "<s>", "</s>");
    chat::RenderOptions o;
    o.now = std::tm{};
    volatile size_t n = t.render({{"system", "Be brief."}, {"user", "Hi ünï 🙂"}, {"assistant", "<think>x</think>\n\nHello"},
                                  {"user", "  bye  "}},
                                 o)
                            .size();
    (void)n;
  });
  return 0;
}
