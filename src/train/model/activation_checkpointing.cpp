#include "train/model/activation_checkpointing.h"

#include <charconv>

#include <fmt/format.h>

#include "base/error.h"

namespace orion::train {

ActivationCheckpointing ActivationCheckpointing::parse(const std::string& s) {
  if (s == "none") return {0};
  if (s == "blocks") return {1};
  if (s.starts_with("every-")) {
    int n = 0;
    const char* first = s.data() + 6;
    const char* last = s.data() + s.size();
    auto [end, ec] = std::from_chars(first, last, n);
    if (ec == std::errc() && end == last && first != last && n >= 1) return {n};
  }
  throw_usage_error(fmt::format("unknown activation checkpointing '{}'", s), "--checkpoint-activations",
                    "use none, blocks (recompute every block in the backward) or every-N (one block in N, N ≥ 1)");
}

std::string ActivationCheckpointing::name() const {
  if (every == 0) return "none";
  if (every == 1) return "blocks";
  return fmt::format("every-{}", every);
}

}  // namespace orion::train
