// Model configurations for `orion train --config file.json`: the JSON and config_from_json, as
// train resolve_model_config reads them (without linking the trainer).
#include "base/file.h"
#include "support.h"
#include "train/loop/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  auto j = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  fuzz::expect_clean([&] {
    ModelConfig c = train::config_from_json(j, "config.json");
    c.validate("config.json");
    volatile size_t n = c.num_params();
    (void)n;
  });
  return 0;
}
