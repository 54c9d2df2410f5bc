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
    case Waiting: return "barrier waits";
    case kPhases: break;
  }
  return "?";
}

void set_decode_profile(DecodeProfile* profile) { g_profile = profile; }
DecodeProfile* decode_profile() { return g_profile; }

}  // namespace orion
