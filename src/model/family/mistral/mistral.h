// The mistral family (model/family/mistral/), registered in model/family/registry.cpp.
#pragma once
#include "model/family/family.h"

namespace orion {

const ModelFamily& mistral_family();

}  // namespace orion
