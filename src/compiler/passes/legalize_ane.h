// Internals of legalize-ane shared by its two files: legalize_ane.cpp (op rewrites) and
// legalize_ane_boundary.cpp (rewrites of the program's inputs and outputs). Not a public API: the
// pass itself is made by make_legalize_ane_pass() (passes.h).
#pragma once
#include "compiler/pass.h"
#include "ir/graph.h"

namespace orion::compiler::ane {

// --- graph-editing helpers ---

// A scalar constant of value v and element type t. Reuses an existing scalar constant of the same
// value and type, so that expansions spend as few C16 slots (inline scalars) as possible.
ir::Value shared_scalar(ir::Graph& g, double v, ir::ElemType t);
// How many node inputs and graph outputs refer to v.
int count_uses(const ir::Graph& g, ir::Value v);
// Marks node i dead when none of its results is used any more (and so on up its operands that
// were used only by it). Graph::compact() drops them at the end of the pass.
void drop_if_unused(ir::Graph& g, int i);
// Recomputes the result types of every non-source node in order (after an input or constant
// changed type). Throws the shape-inference Error of the first node that no longer fits.
void retype(ir::Graph& g);
// Records (or extends) a change of a boundary tensor's declared type.
void record_change(PassContext& ctx, const std::string& name, bool is_input, const ir::Type& before, const ir::Type& after,
                   const std::string& rule);

// --- boundary rewrites (legalize_ane_boundary.cpp) ---

// C1: concats that feed only graph outputs become one output per operand.
bool split_output_concats(ir::Graph& g, PassContext& ctx);
// C14: inputs and outputs that are not [1, C, 1, S] are declared flat and reshaped inside.
bool flatten_boundary_to_ane_layout(ir::Graph& g, PassContext& ctx);
// C7: inputs below the minimum buffer get their sequence axis padded to a bucket.
bool pad_sequence_to_min_buffer(ir::Graph& g, PassContext& ctx);
// C5, C13: records the uniform input and output allocation sizes (never changes the graph).
void record_allocation_sizes(const ir::Graph& g, PassContext& ctx);

// Smallest sequence bucket (compiler/sequence_bucket.h) at least `seq` long whose buffer of
// `bytes_per_position` bytes per position reaches the chip's minimum (C7); 0 when none does.
int64_t sequence_bucket(int64_t seq, int64_t bytes_per_position, const ChipProfile& chip);

}  // namespace orion::compiler::ane
