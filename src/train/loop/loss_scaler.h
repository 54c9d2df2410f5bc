// Loss scaling for low-precision gradients (fp16 products on the CPU, the ANE path's fp16 programs).
//
// fp16 keeps ~11 significant bits down to 2⁻¹⁴ and nothing below 2⁻²⁴: small gradients round away.
// Scaling the loss by s (a power of two) scales every gradient of the backward by s, lifting them
// into fp16's range; the fp32 gradients are divided by s again before the optimiser (exact for a
// power of two). Too large an s overflows a product to ±Inf/NaN; dynamic scaling finds the largest
// s that does not:
//   - a step whose gradients are all finite applies; after `growth_interval` such steps in a row,
//     s doubles (up to kMaxScale);
//   - a step with a non-finite gradient is skipped (no update, no AdamW moment) and s halves (down
//     to kMinScale; from there on a non-finite gradient is the run's problem, not the scale's).
// Modes: none (s = 1, nothing checked: the plain path, bit for bit), a fixed number, dynamic.
#pragma once
#include <cstdint>
#include <string>

namespace orion::train {

class LossScaler {
 public:
  static constexpr float kInitialScale = 65536.0f;  // 2¹⁶, as PyTorch's GradScaler starts
  static constexpr float kMinScale = 1.0f, kMaxScale = 16777216.0f;  // 2²⁴
  enum class Mode { None, Fixed, Dynamic };

  LossScaler() = default;
  // spec: "none", "dynamic" or a positive number (a fixed scale); usage error otherwise.
  static LossScaler parse(const std::string& spec, int growth_interval = 2000);

  Mode mode() const { return mode_; }
  bool enabled() const { return mode_ != Mode::None; }
  float scale() const { return scale_; }
  int growth_interval() const { return growth_interval_; }
  int64_t overflows() const { return overflows_; }  // steps skipped for a non-finite gradient
  int clean_steps() const { return clean_steps_; }  // finite steps since the scale last moved
  // A dynamic scale where a checkpoint left it (a resume continues bit for bit); no-op otherwise.
  void restore(float scale, int clean_steps) {
    if (mode_ == Mode::Dynamic && scale > 0) scale_ = scale, clean_steps_ = clean_steps;
  }

  // After a step's backward: finite = every gradient finite. Returns whether the step may apply;
  // moves a dynamic scale as described above.
  bool update(bool finite);
  // A skipped step that the scale can still fix (dynamic, above kMinScale): not a "bad" step.
  bool overflow_is_recoverable() const { return mode_ == Mode::Dynamic && scale_ >= kMinScale && last_backed_off_; }

 private:
  Mode mode_ = Mode::None;
  float scale_ = 1.0f;
  int growth_interval_ = 2000;
  int clean_steps_ = 0;
  int64_t overflows_ = 0;
  bool last_backed_off_ = false;
};

// Multiplies n gradients by 1/scale (exact for a power of two); returns whether all are finite.
bool unscale_and_check(float* g, size_t n, float scale);

}  // namespace orion::train
