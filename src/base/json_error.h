// The byte a JSON error points at, for readers that catch every nlohmann::json::exception: a
// parse_error carries it (1-based: the byte after the bad one); other errors raised while parsing
// (out_of_range 406, a number too large for a double such as 1e7777 — found by fuzz_hf_config)
// carry none, and give 0.
#pragma once
#include <cstddef>

#include <nlohmann/json.hpp>

namespace orion {

inline size_t json_error_byte(const nlohmann::json::exception& e) {
  const auto* p = dynamic_cast<const nlohmann::json::parse_error*>(&e);
  return p ? p->byte : 0;
}

}  // namespace orion
