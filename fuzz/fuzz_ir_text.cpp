// The IR's text form (ir/text_parse): parse; a graph that parses must print and parse again.
#include <cstdio>
#include <cstdlib>

#include "ir/text.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  std::string printed;
  fuzz::expect_clean([&] { printed = ir::print_graph(ir::parse_graph(fuzz::as_text(data, size), "fuzz.ir")); });
  if (printed.empty()) return 0;
  try {
    ir::parse_graph(printed, "printed.ir");
  } catch (const Error& e) {
    std::fprintf(stderr, "print_graph wrote text that does not parse: %s\n%s\n", e.what(), printed.c_str());
    std::abort();
  }
  return 0;
}
