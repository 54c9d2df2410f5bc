// fuse-casts — folds chains of casts where the result provably does not change.
//
// cast(cast(x, b), c) with x of type a. If the first cast a→b is exact (every a value is a b value:
// fp16→fp32, bool→anything), the middle tensor holds x's values unchanged, so casting it to c is
// the same as casting x to c: the outer cast reads x directly, and when c is a itself (a round
// trip such as fp16→fp32→fp16) it disappears. When the first cast rounds (fp32→fp16, anything to
// int32 or bool) nothing is folded: fp32→fp16→fp32 is how a program rounds to half precision.
// The inner cast is left for `dce` if nothing else uses it. Casts to the same type are
// fold-identity's job.
#include "compiler/passes/passes.h"

namespace orion::compiler {
namespace {

using ir::ElemType;

// True when converting any value of `from` to `to` keeps it exactly.
bool is_exact(ElemType from, ElemType to) {
  if (from == to || from == ElemType::Bool) return true;  // 0 and 1 exist in every type
  return from == ElemType::F16 && to == ElemType::F32;
}

class FuseCasts final : public Pass {
 public:
  const char* name() const override { return "fuse-casts"; }
  const char* summary() const override {
    return "fold cast(cast(x)) whose first cast is exact (fp16→fp32, from bool): cast x directly, or drop a round trip";
  }

  bool run(ir::Graph& g, PassContext&) override {
    bool changed = false;
    for (int i = 0; i < int(g.nodes().size()); i++) {
      ir::Node& n = g.node_mut(i);
      if (n.dead || n.op != ir::Op::Cast) continue;
      const ir::Node& inner = g.node(n.inputs[0]);
      if (inner.op != ir::Op::Cast) continue;
      ir::Value x = inner.inputs[0];
      if (!is_exact(g.type(x).elem, inner.results[0].elem)) continue;
      changed = true;
      if (g.type(x) == n.results[0]) {  // a round trip: the cast chain is x itself
        g.replace_all_uses({i, 0}, x);
        n.dead = true;
      } else {
        n.inputs[0] = x;
      }
    }
    if (changed) g.compact();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_casts_pass() { return std::make_unique<FuseCasts>(); }

}  // namespace orion::compiler
