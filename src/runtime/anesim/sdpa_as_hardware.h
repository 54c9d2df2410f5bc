// C15 as the hardware behaves: the ANE runs scaled_dot_product_attention but ignores its mask —
// a causal mask handed to it changes nothing, which is why the compiler never emits sdpa and
// expands attention into QKᵀ → + mask → softmax → ·V itself. anesim does not refuse sdpa: it runs
// it as the hardware does, softmax(Q·Kᵀ / √D)·V with the attn_mask input dropped, by writing each
// sdpa statement of the MIL text as the plain ops that compute exactly that (so the rest of anesim
// needs no sdpa of its own).
#pragma once
#include <string>
#include <string_view>

#include "runtime/anesim/mil_scan.h"

namespace orion::runtime::anesim {

// The text with every sdpa line replaced (unchanged when there is none). `m` is scan_mil(text);
// its signature check must have passed.
std::string sdpa_with_mask_ignored(std::string_view text, const MilScan& m);

}  // namespace orion::runtime::anesim
