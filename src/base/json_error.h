// The byte a JSON error points at, for readers that catch every nlohmann::json::exception: a
// parse_error carries it (1-based: the byte after the bad one); other errors raised while parsing
// (out_of_range 406, a number too large for a double such as 1e7777 — found by fuzz_hf_config)
// carry none, and give 0.
//
// json_number<T>: a JSON value as an arithmetic type, checked. nlohmann's get<T> converts without
// a check, and a number too large for the target (a float for an int, 1e300 for a float) is
// undefined behaviour — found by fuzz_train_config ("n_layers": 1.1e51).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace orion {

inline size_t json_error_byte(const nlohmann::json::exception& e) {
  const auto* p = dynamic_cast<const nlohmann::json::parse_error*>(&e);
  return p ? p->byte : 0;
}

// Integer types take JSON integers within their range; float and double take any JSON number
// within their range. Anything else throws nlohmann's type_error (302), which the readers already
// turn into an Input error naming the field.
template <typename T>
T json_number(const nlohmann::json& j) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  using L = std::numeric_limits<T>;
  if constexpr (std::is_integral_v<T>) {
    if (j.is_number_unsigned()) {
      const uint64_t v = j.get<uint64_t>();
      if (v <= uint64_t(L::max())) return T(v);
    } else if (j.is_number_integer()) {
      const int64_t v = j.get<int64_t>();
      if (v >= 0 ? uint64_t(v) <= uint64_t(L::max()) : std::is_signed_v<T> && v >= int64_t(L::min())) return T(v);
    }
  } else if (j.is_number()) {
    const double v = j.get<double>();
    if (!std::isfinite(v) || std::fabs(v) <= double(L::max())) return T(v);
  }
  throw nlohmann::json::type_error::create(302, "expected a number that fits, got " + j.dump(), &j);
}

}  // namespace orion
