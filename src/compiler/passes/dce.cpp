// dce — dead-code elimination.
//
// Removes every node whose results reach no graph output, walking backwards from the outputs and
// keeping what they (transitively) use. Inputs always stay, used or not: they are the program's
// interface and the runtime binds them by name (rule C6). A graph whose outputs already use every
// node is left untouched, so a second run reports no change. DCE is also what makes rule C11
// ("return values must name live nodes") hold after the rewriting passes.
#include "compiler/passes/passes.h"

namespace orion::compiler {
namespace {

class Dce final : public Pass {
 public:
  const char* name() const override { return "dce"; }
  const char* summary() const override {
    return "remove nodes whose results reach no graph output (inputs stay: they are the program's interface)";
  }

  bool run(ir::Graph& g, PassContext&) override {
    std::vector<bool> live = live_nodes(g);
    bool changed = false;
    for (int i = 0; i < int(g.nodes().size()); i++) {
      ir::Node& n = g.node_mut(i);
      if (!live[size_t(i)] && !n.dead && n.op != ir::Op::Input) n.dead = true, changed = true;
    }
    if (changed) g.compact();
    return changed;
  }

 private:
  // Nodes are in topological order, so one backward sweep sees every user before its operands.
  static std::vector<bool> live_nodes(const ir::Graph& g) {
    std::vector<bool> live(g.nodes().size(), false);
    for (const ir::GraphOutput& o : g.outputs()) live[size_t(o.value.node)] = true;
    for (int i = int(g.nodes().size()) - 1; i >= 0; i--)
      if (live[size_t(i)])
        for (ir::Value v : g.node(i).inputs) live[size_t(v.node)] = true;
    return live;
  }
};

}  // namespace

std::unique_ptr<Pass> make_dce_pass() { return std::make_unique<Dce>(); }

}  // namespace orion::compiler
