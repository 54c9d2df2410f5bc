#include <gtest/gtest.h>

#include "base/error.h"
#include "ir/graph.h"

namespace orion::ir {

TEST(IrGraph, OpTableHasTheDesignOps) {
  // DESIGN.md §3: 27 operations, plus the composites that legalize-ane expands.
  int core = 0;
  for (int i = 0; i < kNumOps; i++)
    if (!(op_info(Op(i)).flags & kComposite)) core++;
  EXPECT_EQ(core, 27);
  EXPECT_EQ(op_from_name("conv1x1"), Op::Conv1x1);
  EXPECT_STREQ(op_info(Op::Slice).mil, "slice_by_index");
  EXPECT_FALSE(op_from_name("gelu2"));
}

TEST(IrGraph, BuilderInfersShapes) {
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 768, 1, 64}});
  Value w = g.constant_f32("w", {256, 768, 1, 1}, std::vector<float>(256 * 768, 0.5f));
  Value y = g.add_node(Op::Conv1x1, {x, w});
  EXPECT_EQ(g.type(y).shape, (std::vector<int64_t>{1, 256, 1, 64}));
  Value r = g.add_node(Op::Reshape, {y}, {{"shape", std::vector<int64_t>{1, 4, 64, 64}}});
  Value t = g.add_node(Op::Transpose, {r}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value m = g.add_node(Op::Matmul, {t, r}, {{"transpose_x", false}, {"transpose_y", true}});
  EXPECT_EQ(g.type(m).shape, (std::vector<int64_t>{1, 4, 64, 64}));
  Value s = g.add_node(Op::ReduceMean, {y}, {{"axes", std::vector<int64_t>{1}}});
  EXPECT_EQ(g.type(s).shape, (std::vector<int64_t>{1, 1, 1, 64}));
  Value sp = g.add_node(Op::Split, {y}, {{"axis", int64_t(1)}, {"split_sizes", std::vector<int64_t>{64, 192}}});
  auto parts = g.results_of(sp);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(g.type(parts[1]).shape[1], 192);
  g.add_output("out", m);
  EXPECT_EQ(g.verify(), "");
}

TEST(IrGraph, ErrorsNameTheNode) {
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 768, 1, 64}});
  Value w = g.constant_f32("w", {256, 512, 1, 1}, std::vector<float>(256 * 512, 0.0f));
  try {
    g.add_node(Op::Conv1x1, {x, w}, {}, "proj");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'proj'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[Cout, 768, 1, 1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add_node(Op::Add, {x, w}), Error);          // shapes do not broadcast
  EXPECT_THROW(g.input("x", {ElemType::F16, {1}}), Error);   // name used twice
  EXPECT_THROW(g.input("9x", {ElemType::F16, {1}}), Error);  // not an identifier
}

TEST(IrGraph, VerifyCatchesStaleTypesAndDeadOutputs) {
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 8, 1, 16}});
  Value y = g.add_node(Op::Relu, {x}, {}, "y");
  g.add_output("y", y);
  EXPECT_EQ(g.verify(), "");
  g.node_mut(y.node).results[0].shape[3] = 32;
  EXPECT_NE(g.verify().find("stale"), std::string::npos);
  g.node_mut(y.node).results[0].shape[3] = 16;
  g.node_mut(y.node).dead = true;
  EXPECT_NE(g.verify().find("live"), std::string::npos);
}

TEST(IrGraph, SortAndCompactKeepValuesRight) {
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 8, 1, 16}});
  Value a = g.add_node(Op::Relu, {x}, {}, "a");
  Value b = g.add_node(Op::Tanh, {a}, {}, "b");
  g.add_output("out", b);
  // Replace a by a new node appended at the end, then restore order.
  Value a2 = g.add_node(Op::Sigmoid, {x}, {}, "a2");
  g.replace_all_uses(a, a2);
  g.node_mut(a.node).dead = true;
  g.sort_topologically();
  g.compact();
  EXPECT_EQ(g.verify(), "");
  int bi = g.find("b");
  ASSERT_GE(bi, 0);
  EXPECT_EQ(g.node(g.node(bi).inputs[0]).name, "a2");
  EXPECT_EQ(g.find("a"), -1);
}

}  // namespace orion::ir
