// Factories of the compiler passes, one per file in this folder. The registry
// (compiler/pass_registry.cpp) maps each kebab-case name to its factory; docs/adding-a-pass.md
// lists the steps to add one.
#pragma once
#include <memory>

#include "compiler/pass.h"

namespace orion::compiler {

std::unique_ptr<Pass> make_dce_pass();            // "dce"            dce.cpp
std::unique_ptr<Pass> make_fold_identity_pass();  // "fold-identity"  fold_identity.cpp
std::unique_ptr<Pass> make_fuse_casts_pass();     // "fuse-casts"     fuse_casts.cpp
std::unique_ptr<Pass> make_annotate_sram_pass();  // "annotate-sram"  annotate_sram.cpp
std::unique_ptr<Pass> make_legalize_ane_pass();   // "legalize-ane"   legalize_ane.cpp (+ legalize_ane_boundary.cpp)
std::unique_ptr<Pass> make_validate_ane_pass();   // "validate-ane"   validate_ane.cpp

}  // namespace orion::compiler
