// anesim's execution plan: a compiled program made ready to run many times. Built once per load
// from the parsed graph — the live nodes in order, every constant converted to fp32 once (a 1×1
// conv's fp16 weight kept as fp16, packed for streaming), the point after which each intermediate
// value is no longer needed — so that evaluating does no parsing and no constant conversion.
//
// Numerics (what the ANE does, DESIGN.md §2): tensors are stored in fp16, so every fp16-typed
// result is rounded to the nearest fp16 at its op boundary; matmul and conv accumulate in fp32
// inside the op (anesim_gemm.h's product, which sums in fp32 in a fixed order);
// every other op is the reference interpreter's definition on fp16-valued inputs, then rounded —
// the elementwise ops, softmax and the reductions in anesim_fast_ops.h's vectorised, multithreaded
// loops (the same bits), the rest through ir::eval_op. The fp16 conversions use F16C where the CPU
// has it (runtime/fp16_span.h, the same bits as the scalar ones).
//
// A position-wise program (decode and FFN kernels) runs each distinct column of its inputs once
// and copies the results to the equal columns (anesim_columns.h): the same bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/interpret.h"
#include "runtime/anesim/anesim_columns.h"

namespace orion::runtime::anesim {

// A constant 1×1 conv weight [Cout, Cin] as a plan keeps it: fp16 bits packed in blocks of output
// channels (anesim_gemm.h's pack_row_blocks), for products that stream it.
struct BlockedWeight {
  int64_t rows = 0, cols = 0;  // Cout, Cin
  std::vector<uint16_t> bits;
  bool empty() const { return bits.empty(); }
};

class Plan {
 public:
  // g must verify and have fp16 [1, C, 1, S]-style boundaries (validate-ane checked it).
  // input_names / output_names give the binding order (alphabetical, C6).
  Plan(std::shared_ptr<const ir::Graph> g, const std::vector<std::string>& input_names,
       const std::vector<std::string>& output_names);

  // Packed fp16 element counts of each input / output, in binding order.
  const std::vector<int64_t>& input_numel() const { return input_numel_; }
  const std::vector<int64_t>& output_numel() const { return output_numel_; }

  // How run() computes the columns of a position-wise program: each distinct one once, or every
  // one as the hardware does. Both write the same bytes (tests compare them).
  enum class Columns { Distinct, Every };
  bool position_wise() const { return columns_.position_wise(); }

  // Reads every input as packed fp16 from its pointer (binding order), runs the program and writes
  // every output as packed fp16 to its pointer.
  void run(const std::vector<const uint16_t*>& inputs, const std::vector<uint16_t*>& outputs,
           Columns columns = Columns::Distinct) const;

 private:
  struct Step {
    int node = -1;
    std::vector<int> frees;  // nodes whose results are not read after this step
  };
  std::shared_ptr<const ir::Graph> g_;
  std::vector<int> input_nodes_;          // binding order
  std::vector<ir::Value> output_values_;  // binding order
  std::vector<int64_t> input_numel_, output_numel_;
  std::vector<Step> steps_;              // live op nodes in topological order
  std::vector<ir::Tensor32> constants_;  // by node index; empty for non-constants
  // The fp16 constant weights of 1×1 convs, packed in blocks of output channels once per load (by
  // node index; empty for others): a decode program's few distinct columns run through
  // gemm_fixed_order's narrow product, which then streams each block front to back, 2 bytes per
  // weight. A constant no other op reads is kept only in this form.
  std::vector<BlockedWeight> conv_weights_;
  ColumnLayout columns_;  // which values carry the sequence columns (position-wise programs)

  void pack_conv_weights();
  // The inputs as fp32 tensors by node index, narrowed to the columns of `narrow` when given.
  std::vector<std::vector<ir::Tensor32>> read_inputs(const std::vector<const uint16_t*>& inputs,
                                                     const ColumnClasses* narrow) const;
  void write_outputs(const std::vector<std::vector<ir::Tensor32>>& values, const std::vector<uint16_t*>& outputs,
                     const ColumnClasses* narrow) const;
  // Node i's result types at `width` columns (its own types when it does not carry them).
  std::vector<ir::Type> result_types(int i, int64_t width) const;
};

// Rounds every element to the nearest fp16 value (ties to even, overflow to ±inf).
void round_fp16(ir::Tensor32& t);

// The fast ops: fp32 accumulation in a fixed order (gemm_fixed_order), inputs and outputs as fp32.
// conv 1×1: x [1, Cin, 1, S], w [Cout, Cin, 1, 1] → [1, Cout, 1, S]
ir::Tensor32 conv1x1_fast(const ir::Tensor32& x, const ir::Tensor32& w);
// The same with the weight packed (the same bits as conv1x1_fast on its values: widening fp16 is exact).
ir::Tensor32 conv1x1_fast_blocked(const ir::Tensor32& x, const BlockedWeight& w);
// matmul with transpose flags on the last two axes and numpy broadcasting of the leading ones.
ir::Tensor32 matmul_fast(const ir::Tensor32& x, const ir::Tensor32& y, bool tx, bool ty,
                         const std::vector<int64_t>& out_shape);

}  // namespace orion::runtime::anesim
