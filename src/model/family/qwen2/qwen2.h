// The qwen2 family (model/family/qwen2/), registered in model/family/registry.cpp.
#pragma once
#include "model/family/family.h"

namespace orion {

const ModelFamily& qwen2_family();

}  // namespace orion
