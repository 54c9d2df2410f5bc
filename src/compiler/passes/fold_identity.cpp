// fold-identity — removes operations that compute nothing.
//
// An identity, a reshape to the shape it already has, a transpose by the identity permutation and
// a cast to the element type it already has are all no-ops: every use of their result is pointed
// at their operand and the node is dropped. Two layout ops in a row fold into one first: a reshape
// of a reshape becomes one reshape of the original tensor (only the final shape matters), and a
// transpose of a transpose becomes one transpose by the composed permutation — which may be the
// identity and then disappears too. The inner node is left for `dce` if nothing else uses it.
// Graph outputs keep their names; they just name the operand instead.
#include <numeric>

#include "compiler/passes/passes.h"

namespace orion::compiler {
namespace {

using ir::Op;

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); i++)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

// transpose(transpose(x, inner), outer) == transpose(x, composed): result axis i is axis outer[i]
// of the middle tensor, which is axis inner[outer[i]] of x.
std::vector<int64_t> compose(const std::vector<int64_t>& inner, const std::vector<int64_t>& outer) {
  std::vector<int64_t> p;
  for (int64_t o : outer) p.push_back(inner[size_t(o)]);
  return p;
}

// Rewrites node i to skip a producer of the same layout op; true when it did.
bool merge_with_producer(ir::Graph& g, int i) {
  ir::Node& n = g.node_mut(i);
  if (n.op != Op::Reshape && n.op != Op::Transpose) return false;
  const ir::Node& p = g.node(n.inputs[0]);
  if (p.op != n.op) return false;
  if (n.op == Op::Transpose)
    n.attrs["perm"] = compose(ir::attr_ints(p.attrs, "perm", p.name), ir::attr_ints(n.attrs, "perm", n.name));
  n.inputs[0] = p.inputs[0];  // a reshape keeps its own target shape: the element count is the same
  return true;
}

bool is_noop(const ir::Graph& g, const ir::Node& n) {
  switch (n.op) {
    case Op::Identity: return true;
    case Op::Reshape:
    case Op::Cast: return g.type(n.inputs[0]) == n.results[0];
    case Op::Transpose: return is_identity_perm(ir::attr_ints(n.attrs, "perm", n.name));
    // Every other op computes something whatever its attributes.
    default: return false;
  }
}

class FoldIdentity final : public Pass {
 public:
  const char* name() const override { return "fold-identity"; }
  const char* summary() const override {
    return "remove identity, same-shape reshape, identity transpose, same-type cast; merge reshape and transpose chains";
  }

  bool run(ir::Graph& g, PassContext&) override {
    bool changed = false;
    for (int i = 0; i < int(g.nodes().size()); i++) {
      if (g.node(i).dead) continue;
      changed |= merge_with_producer(g, i);
      ir::Node& n = g.node_mut(i);
      if (!is_noop(g, n)) continue;
      g.replace_all_uses({i, 0}, n.inputs[0]);
      n.dead = changed = true;
    }
    if (changed) g.compact();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_identity_pass() { return std::make_unique<FoldIdentity>(); }

}  // namespace orion::compiler
