#include "train/loop/loss_scaler.h"

#include <cmath>
#include <cstdlib>

#include "base/error.h"

namespace orion::train {

LossScaler LossScaler::parse(const std::string& spec, int growth_interval) {
  if (growth_interval < 1) throw_usage_error("--loss-scale-window must be ≥ 1", "--loss-scale-window");
  LossScaler s;
  s.growth_interval_ = growth_interval;
  if (spec == "none") return s;
  if (spec == "dynamic") {
    s.mode_ = Mode::Dynamic, s.scale_ = kInitialScale;
    return s;
  }
  char* end = nullptr;
  const double v = std::strtod(spec.c_str(), &end);
  if (spec.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v) || v > kMaxScale)
    throw_usage_error(fmt::format("--loss-scale '{}' is neither none, dynamic nor a number in (0, 2^24]", spec),
                      "--loss-scale", "use dynamic, none, or a power of two such as 1024");
  s.mode_ = Mode::Fixed, s.scale_ = float(v);
  return s;
}

bool LossScaler::update(bool finite) {
  last_backed_off_ = false;
  if (mode_ == Mode::None) return finite;
  if (finite) {
    if (mode_ == Mode::Dynamic && ++clean_steps_ >= growth_interval_) {
      scale_ = std::min(kMaxScale, scale_ * 2.0f);
      clean_steps_ = 0;
    }
    return true;
  }
  ++overflows_;
  clean_steps_ = 0;
  if (mode_ == Mode::Dynamic && scale_ > kMinScale) {
    scale_ = std::max(kMinScale, scale_ * 0.5f);
    last_backed_off_ = true;
  }
  return false;
}

bool unscale_and_check(float* g, size_t n, float scale) {
  const float inv = 1.0f / scale;
  size_t bad = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : bad) if (n > (1u << 16))
  for (size_t i = 0; i < n; i++) {
    g[i] *= inv;
    bad += !std::isfinite(g[i]);
  }
  return bad == 0;
}

}  // namespace orion::train
