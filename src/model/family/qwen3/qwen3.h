// The qwen3 family (model/family/qwen3/), registered in model/family/registry.cpp.
#pragma once
#include "model/family/family.h"

namespace orion {

const ModelFamily& qwen3_family();

}  // namespace orion
