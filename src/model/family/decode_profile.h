// Where a decode step's time goes: `orion bench generate --phases`.
//
// decode_step (decode_step.cpp) runs a token in one parallel region, its threads meeting at four
// barriers per layer. With a profile attached, each thread adds the time of each of its phases
// (the split below) and of its waits at each of the barriers; the report divides by the tokens. A phase
// that reads memory at the bandwidth the bound measures takes its bytes over that bandwidth; a
// phase slower than that, or a long wait, is where a token loses against its bound.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace orion {

struct DecodeProfile {
  enum Phase {
    Attention,   // norm, q/k/v rows, q/k norms and RoPE, the KV cache, attention (by kv heads)
    Projection,  // x += att·Woᵀ
    FfnIn,       // norm, w1 (and w3) rows: SwiGLU or GELU
    FfnOut,      // x += hb·W2ᵀ
    Classifier,  // the final norm and the logits
    // At the barrier after each of the four phases of a layer: where the threads' shares of a
    // phase came out uneven (the attention's share is whole kv heads; the rows' a few rows).
    WaitAttention,
    WaitWo,
    WaitFfnIn,
    WaitFfnOut,
    kPhases
  };
  static const char* name(Phase p);
  std::vector<std::array<double, kPhases>> seconds;  // [thread][phase], summed over the tokens
  int64_t tokens = 0;
};

// Attaches a profile to every decode_step that starts from now on (nullptr: none, the default).
// Set it while no decode step runs.
void set_decode_profile(DecodeProfile* profile);
DecodeProfile* decode_profile();

}  // namespace orion
