#include "model/family/decode_profile.h"

namespace orion {
namespace {
DecodeProfile* g_profile = nullptr;
}

const char* DecodeProfile::name(Phase p) {
  switch (p) {
    case Attention: return "attention";
    case Projection: return "wo";
    case FfnIn: return "ffn in";
    case FfnOut: return "ffn out";
    case Classifier: return "classifier";
    case WaitAttention: return "wait after attention";
    case WaitWo: return "wait after wo";
    case WaitFfnIn: return "wait after ffn in";
    case WaitFfnOut: return "wait after ffn out";
    case kPhases: break;
  }
  return "?";
}

void set_decode_profile(DecodeProfile* profile) { g_profile = profile; }
DecodeProfile* decode_profile() { return g_profile; }

}  // namespace orion
