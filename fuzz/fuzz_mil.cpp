// MIL text (compiler/mil/parse_mil) with an optional weight blob: "<blob image>\n--8<--\n<MIL text>";
// the blob is the program's "@model_path/weights/weight.bin" (emit_mil's single-file layout).
#include "compiler/mil/parse_mil.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  const auto parts = fuzz::split_two(fuzz::as_text(data, size), {});
  const std::string_view blob = parts.first, text = parts.second;
  compiler::WeightDict weights;
  if (!blob.empty()) weights["@model_path/weights/weight.bin"].assign(blob.begin(), blob.end());
  fuzz::expect_clean([&] { compiler::parse_mil(text, weights, "fuzz.mil"); });
  return 0;
}
