// annotate-sram — estimates the on-chip working set (DESIGN.md §2, rule C20).
//
// Per op: the bytes it touches while it runs — each distinct input (weights included) plus its
// results — stored on the node as the int attribute "sram_bytes". Per program: the constants (they
// stay resident for the whole evaluation) plus the peak, over the node order, of the activations
// alive at once; a value is alive from the node that defines it to its last use, and graph outputs
// to the end. The total goes to ctx.sram_estimate_bytes. Above the chip's SRAM (32 MiB on M4) the
// program runs ~30% slower, so the pass warns (rule C20) and names the op with the largest working
// set — the first candidate for tiling.
//
// The graph's meaning never changes. The pass reports a change only when it wrote a different
// attribute value, so a second run over the same graph reports none; its C20 warning replaces the
// one from an earlier run instead of piling up.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "compiler/passes/passes.h"

namespace orion::compiler {
namespace {

constexpr const char* kAttr = "sram_bytes";

int64_t op_bytes(const ir::Graph& g, const ir::Node& n) {
  int64_t bytes = 0;
  for (ir::Value v : std::set<ir::Value>(n.inputs.begin(), n.inputs.end())) bytes += int64_t(g.type(v).bytes());
  for (const ir::Type& t : n.results) bytes += int64_t(t.bytes());
  return bytes;
}

// Constants plus the largest sum of activations alive at any one node.
int64_t program_bytes(const ir::Graph& g) {
  const int N = int(g.nodes().size());
  std::vector<int> last_use(size_t(N), -1);  // per node: the last node index using any of its results
  for (int i = 0; i < N; i++)
    for (ir::Value v : g.node(i).inputs) last_use[size_t(v.node)] = std::max(last_use[size_t(v.node)], i);
  for (const ir::GraphOutput& o : g.outputs()) last_use[size_t(o.value.node)] = N;
  int64_t constants = 0, alive = 0, peak = 0;
  std::vector<std::vector<int>> dies_at(size_t(N) + 1);
  for (int i = 0; i < N; i++) {
    const ir::Node& n = g.node(i);
    if (n.dead) continue;
    int64_t bytes = 0;
    for (const ir::Type& t : n.results) bytes += int64_t(t.bytes());
    if (n.op == ir::Op::Const) {
      constants += bytes;
      continue;
    }
    alive += bytes;  // node i's results are born here...
    peak = std::max(peak, alive);
    dies_at[size_t(std::max(last_use[size_t(i)], i))].push_back(i);
    for (int d : dies_at[size_t(i)])  // ...and whatever node i was the last to read dies after it
      for (const ir::Type& t : g.node(d).results) alive -= int64_t(t.bytes());
  }
  return constants + peak;
}

std::string mib(int64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

class AnnotateSram final : public Pass {
 public:
  const char* name() const override { return "annotate-sram"; }
  const char* summary() const override {
    return "estimate the working set per op (attr sram_bytes) and per program; warn (C20) above the chip's SRAM";
  }

  bool run(ir::Graph& g, PassContext& ctx) override {
    bool changed = false;
    int largest = -1;
    int64_t largest_bytes = -1;
    for (int i = 0; i < int(g.nodes().size()); i++) {
      ir::Node& n = g.node_mut(i);
      if (n.dead || n.op == ir::Op::Input || n.op == ir::Op::Const) continue;
      int64_t bytes = op_bytes(g, n);
      auto it = n.attrs.find(kAttr);
      if (it == n.attrs.end() || it->second != ir::AttrValue(bytes)) n.attrs[kAttr] = bytes, changed = true;
      if (bytes > largest_bytes) largest = i, largest_bytes = bytes;
    }
    ctx.sram_estimate_bytes = program_bytes(g);
    std::erase_if(ctx.diagnostics, [](const Diagnostic& d) {
      return d.rule == "C20" && d.level == Diagnostic::Level::Warning;  // ours, from an earlier run
    });
    if (ctx.sram_estimate_bytes > ctx.chip->sram_bytes) {
      std::string node = largest >= 0 ? g.node(largest).name : "";
      ctx.warn("C20", node,
               fmt::format("working set of program '{}' is about {}, above the {} SRAM of {} (runs ~30% slower); "
                           "largest op: '{}' with {}",
                           g.name(), mib(ctx.sram_estimate_bytes), ctx.chip->name, mib(ctx.chip->sram_bytes), node,
                           mib(largest_bytes)));
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_annotate_sram_pass() { return std::make_unique<AnnotateSram>(); }

}  // namespace orion::compiler
