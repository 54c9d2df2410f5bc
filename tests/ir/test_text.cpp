// The IR text form: round trips both ways, every op, constants, attributes, and the exact error
// messages for invalid texts (with line and column).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "base/dtype.h"
#include "base/error.h"
#include "ir/graph.h"
#include "ir/text.h"

namespace orion::ir {
namespace {

// Two graphs are the same when every observable part matches: name, nodes (op, name, inputs,
// attrs, result types, constant bytes) and outputs.
void expect_same(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); i++) {
    const Node &x = a.nodes()[i], &y = b.nodes()[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.attrs, y.attrs);
    EXPECT_EQ(x.results, y.results);
    ASSERT_EQ(bool(x.data), bool(y.data));
    if (x.data) {
      EXPECT_EQ(x.data->bytes, y.data->bytes);
    }
  }
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); i++) {
    EXPECT_EQ(a.outputs()[i].name, b.outputs()[i].name);
    EXPECT_EQ(a.outputs()[i].value, b.outputs()[i].value);
  }
}

// The message of the Error that parsing `text` throws ("" if it parses).
std::string parse_error(const std::string& text) {
  try {
    parse_graph(text, "t.ir");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    return e.what();
  }
  return "";
}

std::shared_ptr<ConstData> bytes_of(std::vector<uint8_t> b) {
  auto d = std::make_shared<ConstData>();
  d->bytes = std::move(b);
  return d;
}

const char* kFfn = R"(graph ffn {
  %x = input : fp16[1, 64, 1, 16]
  %w = const dense<"0x003C0040004200440045004600470048"> : fp16[2, 4, 1, 1]
  %s = const splat<1.5> : fp16[]
  %w2 = const splat<0.0> : fp16[32, 64, 1, 1]
  %y = conv1x1(%x, %w2) : fp16[1, 32, 1, 16]
  %p:2 = split(%y) {axis = 1, split_sizes = [16, 16]} : fp16[1, 16, 1, 16], fp16[1, 16, 1, 16]
  %z = relu(%p#1) : fp16[1, 16, 1, 16]
  %m = mul(%z, %s) : fp16[1, 16, 1, 16]
  return %out = %m, %first = %p#0
}
)";

TEST(IrText, CanonicalTextRoundTrips) {
  Graph g = parse_graph(kFfn);
  EXPECT_EQ(print_graph(g), kFfn);
  EXPECT_EQ(g.name(), "ffn");
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[1].name, "first");
  EXPECT_EQ(g.outputs()[1].value, (Value{g.find("p"), 0}));
  EXPECT_EQ(g.type({g.find("p"), 1}).str(), "fp16[1, 16, 1, 16]");
  // dense bytes are in memory order: 0x3C00 = 1.0 in fp16, little-endian.
  const Node& w = g.node(g.find("w"));
  EXPECT_EQ(w.data->bytes[0], 0x00);
  EXPECT_EQ(w.data->bytes[1], 0x3C);
  EXPECT_EQ(g.node(g.find("w2")).data->bytes.size(), 32u * 64 * 2);
  EXPECT_EQ(g.verify(), "");
}

TEST(IrText, NonCanonicalSpellingPrintsCanonically) {
  const char* loose = R"(// a comment before the graph
graph ffn{

  %x=input:fp16[1,4,1,16]   // trailing comment
  %r = reshape(%x) {shape=[1,64]} : fp16[1,64]
  %c = const splat<2> : fp32[2]
  return %r=%r
})";
  EXPECT_EQ(print_graph(parse_graph(loose)), R"(graph ffn {
  %x = input : fp16[1, 4, 1, 16]
  %r = reshape(%x) {shape = [1, 64]} : fp16[1, 64]
  %c = const splat<2.0> : fp32[2]
  return %r = %r
}
)");
}

// One node of every op in ops.def, built through the API, survives print → parse exactly.
TEST(IrText, EveryOpRoundTrips) {
  Graph g("all_ops");
  using V = std::vector<int64_t>;
  Value x = g.input("x", {ElemType::F16, {1, 8, 1, 16}});
  Value w = g.constant_f32("w", {4, 8, 1, 1}, std::vector<float>(32, 0.25f));
  Value b = g.constant_f32("b", {4}, {1, 2, 3, 4});
  Value h = g.scalar("half", 0.5);
  std::vector<Value> ys = {
      g.add_node(Op::Identity, {x}),
      g.add_node(Op::Conv1x1, {x, w}),
      g.add_node(Op::Conv1x1, {x, w, b}, {}, "conv_bias"),
      g.add_node(Op::Add, {x, h}),
      g.add_node(Op::Sub, {x, h}),
      g.add_node(Op::Mul, {x, x}),
      g.add_node(Op::Neg, {x}),
      g.add_node(Op::Relu, {x}),
      g.add_node(Op::Tanh, {x}),
      g.add_node(Op::Sigmoid, {x}),
      g.add_node(Op::Exp, {x}),
      g.add_node(Op::Pow, {x, h}),
      g.add_node(Op::Sqrt, {x}),
      g.add_node(Op::Rsqrt, {x}),
      g.add_node(Op::ReduceSum, {x}, {{"axes", V{1}}}),
      g.add_node(Op::ReduceMean, {x}, {{"axes", V{-1}}, {"keep_dims", false}}),
      g.add_node(Op::ReduceMax, {x}, {{"axes", V{1, 3}}, {"keep_dims", true}}),
      g.add_node(Op::Reshape, {x}, {{"shape", V{1, 2, 4, 16}}}),
      g.add_node(Op::Transpose, {x}, {{"perm", V{0, 3, 2, 1}}}),
      g.add_node(Op::Split, {x}, {{"axis", int64_t(1)}, {"split_sizes", V{3, 5}}}),
      g.add_node(Op::Pad, {x}, {{"pad", V{0, 0, 0, 0, 0, 0, 0, 16}}, {"value", 0.0}}),
      g.add_node(Op::Slice, {x}, {{"begin", V{0, 0, 0, 0}}, {"end", V{1, 8, 1, 8}}}),
      g.add_node(Op::Cast, {x}, {{"dtype", std::string("fp32")}}),
      g.add_node(Op::Softmax, {x}, {{"axis", int64_t(1)}}),
      g.add_node(Op::Concat, {x, x}, {{"axis", int64_t(3)}}),
      g.add_node(Op::Gelu, {x}),
      g.add_node(Op::Silu, {x}),
  };
  Value q = g.add_node(Op::Reshape, {x}, {{"shape", V{1, 2, 16, 4}}}, "q");
  ys.push_back(g.add_node(Op::Matmul, {q, q}, {{"transpose_x", false}, {"transpose_y", true}}));
  ys.push_back(g.add_node(Op::Attention, {q, q, q}));
  Value mask = g.constant_f32("mask", {1, 1, 16, 16}, std::vector<float>(256, -1e4f));
  ys.push_back(g.add_node(Op::Attention, {q, q, q, mask}, {}, "masked"));
  for (size_t i = 0; i < ys.size(); i++) g.add_output("o" + std::to_string(i), ys[i]);
  g.add_output("split_tail", {ys[19].node, 1});

  // Every op appears at least once.
  std::set<Op> seen;
  for (const Node& n : g.nodes()) seen.insert(n.op);
  EXPECT_EQ(int(seen.size()), kNumOps);

  std::string text = print_graph(g);
  Graph back = parse_graph(text);
  expect_same(g, back);
  EXPECT_EQ(print_graph(back), text);
  EXPECT_NE(text.find("%split:2 = split(%x) {axis = 1, split_sizes = [3, 5]}"), std::string::npos) << text;
  EXPECT_NE(text.find("%pad = pad(%x) {pad = [0, 0, 0, 0, 0, 0, 0, 16], value = 0.0}"), std::string::npos) << text;
  EXPECT_NE(text.find("%cast = cast(%x) {dtype = \"fp32\"} : fp32[1, 8, 1, 16]"), std::string::npos) << text;
  EXPECT_NE(text.find("%matmul = matmul(%q, %q) {transpose_x = false, transpose_y = true}"), std::string::npos);
  EXPECT_NE(text.find("return %o0 = %identity,"), std::string::npos);
  EXPECT_NE(text.find("%split_tail = %split#1\n"), std::string::npos);
}

TEST(IrText, AttributesOfEveryKindRoundTrip) {
  Graph g("attrs");
  Value x = g.input("x", {ElemType::F32, {2, 3}});
  Attrs a = {{"b", true},
             {"c", false},
             {"i", int64_t(-9007199254740993)},
             {"f", 0.1},
             {"g", -2.5e-300},
             {"h", 1e300},
             {"inf", INFINITY},
             {"ninf", -INFINITY},
             {"whole", 3.0},
             {"s", std::string("quote \" backslash \\ tab \t end")},
             {"empty", std::vector<int64_t>{}},
             {"list", std::vector<int64_t>{-1, 0, INT64_MAX}}};
  g.add_node(Op::Relu, {x}, a, "y");
  g.node_mut(0).attrs = {{"note", std::string("input attrs print too")}};
  g.add_output("y", {1, 0});
  std::string text = print_graph(g);
  Graph back = parse_graph(text);
  expect_same(g, back);
  EXPECT_EQ(print_graph(back), text);
  EXPECT_NE(text.find("whole = 3.0"), std::string::npos) << text;
  EXPECT_NE(text.find("f = 0.1,"), std::string::npos) << text;
  EXPECT_NE(text.find("ninf = -inf"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(s = "quote \" backslash \\ tab \09 end")"), std::string::npos) << text;
  // An int attribute stays an int and a float stays a float.
  EXPECT_TRUE(std::holds_alternative<int64_t>(back.node(1).attrs.at("i")));
  EXPECT_TRUE(std::holds_alternative<double>(back.node(1).attrs.at("whole")));
  // NaN prints as nan and reads back as a NaN double.
  g.node_mut(1).attrs = {{"n", double(NAN)}};
  Graph nan_back = parse_graph(print_graph(g));
  EXPECT_TRUE(std::isnan(std::get<double>(nan_back.node(1).attrs.at("n"))));
}

TEST(IrText, ConstantsKeepTheirExactBytes) {
  Graph g("consts");
  // fp16 NaN splat (prints dense, payload kept), a non-splat fp32, int32, bool, empty, odd fp16.
  g.constant("nan16", {ElemType::F16, {2}}, bytes_of({0x01, 0x7E, 0x01, 0x7E}));
  g.constant("f32", {ElemType::F32, {2}}, bytes_of({0, 0, 0x80, 0x3F, 0, 0, 0, 0x40}));
  g.constant("i32", {ElemType::I32, {3}},
             bytes_of({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}));
  g.constant("flags", {ElemType::Bool, {2}}, bytes_of({1, 1}));
  g.constant("odd_bool", {ElemType::Bool, {2}}, bytes_of({2, 2}));
  g.constant("none", {ElemType::F16, {0, 4}}, bytes_of({}));
  g.constant("negzero", {ElemType::F16, {}}, bytes_of({0x00, 0x80}));
  g.constant("tiny", {ElemType::F16, {}}, bytes_of({0x01, 0x00}));   // the smallest subnormal
  g.constant("third", {ElemType::F16, {}}, bytes_of({0x55, 0x35}));  // fp16 nearest 1/3
  std::string text = print_graph(g);
  EXPECT_NE(text.find(R"(%nan16 = const dense<"0x017E017E"> : fp16[2])"), std::string::npos) << text;
  EXPECT_NE(text.find("%i32 = const splat<-1> : int32[3]"), std::string::npos) << text;
  EXPECT_NE(text.find("%flags = const splat<true> : bool[2]"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(%odd_bool = const dense<"0x0202"> : bool[2])"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(%none = const dense<"0x"> : fp16[0, 4])"), std::string::npos) << text;
  EXPECT_NE(text.find("%negzero = const splat<-0.0> : fp16[]"), std::string::npos) << text;
  Graph back = parse_graph(text);
  expect_same(g, back);
  EXPECT_EQ(print_graph(back), text);
}

// A splat of nan or -nan prints as one again (a 32 MiB one printed dense was 64 MB of text to parse
// again, > 10 s under the sanitizers: fuzz_ir_text), with the same bits.
TEST(IrText, NanSplatsPrintAsSplats) {
  const std::string text = R"(graph nans {
  %h = const splat<nan> : fp16[4096, 4096, 1, 1]
  %f = const splat<-nan> : fp32[3]
  %x = input : fp16[1]
  return %x = %x
}
)";
  const Graph g = parse_graph(text);
  const std::string printed = print_graph(g);
  EXPECT_EQ(printed, text);
  const Graph back = parse_graph(printed);
  EXPECT_EQ(back.node(0).data->bytes, g.node(0).data->bytes);
  EXPECT_EQ(back.node(1).data->bytes, g.node(1).data->bytes);
  uint16_t h = 0;
  std::memcpy(&h, g.node(0).data->bytes.data(), 2);
  EXPECT_TRUE(std::isnan(f16_to_f32(h)));
}

TEST(IrText, BigConstantsElideOnlyWhenAsked) {
  Graph g("big");
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); i++) v[i] = float(i);
  g.constant_f32("w", {64}, v);
  std::string full = print_graph(g);
  EXPECT_NE(full.find("dense<\"0x00000"), std::string::npos) << full;
  const auto& bytes = g.node(0).data->bytes;
  std::string elided = print_graph(g, {.elide_constants_above = 100});
  EXPECT_NE(elided.find(fmt::format("%w = const blob<128 bytes, fnv1a=0x{:016X}> : fp16[64]", fnv1a64(bytes.data(), 128))),
            std::string::npos)
      << elided;
  EXPECT_EQ(print_graph(g, {.elide_constants_above = 128}), full);                      // not above the limit
  EXPECT_EQ(fnv1a64(reinterpret_cast<const uint8_t*>("a"), 1), 0xaf63dc4c8601ec8cull);  // published test vector
  EXPECT_EQ(parse_error(elided),
            "t.ir: field 'line 2, column 14': elided constant data (blob<...>) cannot be parsed: print the graph "
            "without elide_constants_above");
}

TEST(IrText, ParseErrorsSayWhereAndWhat) {
  const std::string head = "graph g {\n  %x = input : fp16[1, 8, 1, 16]\n";
  auto err = [&](const std::string& body) { return parse_error(head + body + "  return %x = %x\n}\n"); };
  EXPECT_EQ(parse_error("grap g {"), "t.ir: field 'line 1, column 1': expected 'graph' at the start, got 'grap'");
  EXPECT_EQ(parse_error("graph g {\n  return\n"),
            "t.ir: field 'line 3, column 1': expected '}' after the return line, got end of input");
  EXPECT_EQ(parse_error("graph g {\n  return\n}\n}"),
            "t.ir: field 'line 4, column 1': expected end of input after '}', got '}'");
  EXPECT_EQ(parse_error("graph g {\n}\n"),
            "t.ir: field 'line 2, column 1': expected a node ('%name = ...') or 'return', got '}'");
  EXPECT_EQ(err("  %y = relu %x : fp16[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 13': expected '(' after 'relu', got '%x'");
  EXPECT_EQ(err("  %y = frobnicate(%x) : fp16[1, 8, 1, 16]\n"), "t.ir: field 'line 3, column 8': unknown op 'frobnicate'");
  EXPECT_EQ(err("  %y = relu(%q) : fp16[1, 8, 1, 16]\n"), "t.ir: field 'line 3, column 13': '%q' is not defined");
  EXPECT_EQ(err("  %x = relu(%x) : fp16[1, 8, 1, 16]\n"), "t.ir: field 'line 3, column 3': '%x' is already defined");
  EXPECT_EQ(err("  %y = relu(%x) : fp8[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 19': unknown element type 'fp8' (expected fp16, fp32, int32 or bool)");
  EXPECT_EQ(err("  %y = relu(%x) : fp16[1, 8, 1, 8]\n"),
            "t.ir: field 'line 3, column 19': node 'y': result type is written fp16[1, 8, 1, 8] but shape inference "
            "gives fp16[1, 8, 1, 16]");
  EXPECT_EQ(err("  %y = reshape(%x) {shape = [3, 5]} : fp16[3, 5]\n"),
            "t.ir: field 'line 3, column 8': node 'y': cannot reshape fp16[1, 8, 1, 16] into [3, 5]");
  EXPECT_EQ(err("  %y = relu(%x) {k = 1, k = 2} : fp16[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 25': attribute 'k' is given twice");
  EXPECT_EQ(err("  %y = relu(%x) {k = 1 : fp16[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 24': expected ',' or '}' in the attributes, got ':'");
  EXPECT_EQ(err("  %y = relu(%x) {k = 99999999999999999999} : fp16[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 22': integer 99999999999999999999 is out of range");
  EXPECT_EQ(err("  %p = split(%x) {axis = 1, split_sizes = [4, 4]} : fp16[1, 4, 1, 16]\n"),
            "t.ir: field 'line 3, column 53': node 'p' has 2 results but 1 type is written");
  EXPECT_EQ(err("  %p:2 = split(%x) {axis = 1, split_sizes = [4, 4]} : fp16[1, 4, 1, 16]\n"),
            "t.ir: field 'line 3, column 55': node 'p' declares 2 results but 1 type is written");
  EXPECT_EQ(err("  %p:2 = split(%x) {axis = 1, split_sizes = [4, 4]} : fp16[1, 4, 1, 16], fp16[1, 4, 1, 16]\n"
                "  %y = relu(%p) : fp16[1, 4, 1, 16]\n"),
            "t.ir: field 'line 4, column 13': '%p' has 2 results: pick one with '%p#i'");
  EXPECT_EQ(err("  %y = relu(%x#0) : fp16[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 16': '%x' has one result: write '%x'");
  EXPECT_EQ(err("  %w = const dense<\"0x0000\"> : fp16[2]\n"),
            "t.ir: field 'line 3, column 20': constant 'w' of type fp16[2] needs 4 bytes, dense data has 2");
  EXPECT_EQ(err("  %w = const dense<\"0x00G0\"> : fp16[1]\n"),
            "t.ir: field 'line 3, column 20': dense data has a non-hex character at digit 3");
  EXPECT_EQ(err("  %w = const splat<true> : fp16[1]\n"),
            "t.ir: field 'line 3, column 20': splat value 'true' is not a valid fp16");
  EXPECT_EQ(err("  %w = const [1] : fp16[1]\n"),
            "t.ir: field 'line 3, column 14': expected constant data (dense<\"0x...\"> or splat<value>), got '['");
  EXPECT_EQ(err("  %s = cast(%x) {dtype = \"fp64\"} : fp32[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 8': node 's': cast needs attribute dtype = fp16 | fp32 | int32 | bool");
  EXPECT_EQ(err("  %y = relu(%x) : fp16[1, 8, 1, 16] extra\n"),
            "t.ir: field 'line 3, column 37': expected end of line, got 'extra'");
  EXPECT_EQ(err("  %y = relu(%x) {s = \"open} : fp16[1, 8, 1, 16]\n"),
            "t.ir: field 'line 3, column 22': unterminated string");
  EXPECT_EQ(err("  %y = relu(%x) ; fp16[1, 8, 1, 16]\n"), "t.ir: field 'line 3, column 17': unexpected character ';'");
  EXPECT_EQ(err(std::string("  %y = relu(%x)\0", 16)), "t.ir: field 'line 3, column 16': unexpected character '\\x00'");
  EXPECT_EQ(err("  %y = relu(%x) \xC3\xA9\n"), "t.ir: field 'line 3, column 17': unexpected character '\\xC3'");
  EXPECT_EQ(parse_error(head + "  return %a = %x, %a = %x\n}\n"),
            "t.ir: field 'line 3, column 19': output 'a' is given twice");
}

TEST(IrText, ErrorsNameTheSourceAndCarryTheLocation) {
  try {
    parse_graph("graph g {\n  %x = input : fp16[1]\n  return %y = %z\n}\n", "model/ffn.ir");
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_EQ(e.context().file, "model/ffn.ir");
    EXPECT_EQ(e.context().field, "line 3, column 15");
    EXPECT_EQ(e.message(), "'%z' is not defined");
  }
}

TEST(IrText, HostileSizesAreErrorsNotAllocations) {
  EXPECT_EQ(parse_error("graph g {\n  %w = const splat<0.0> : fp16[1099511627776, 1099511627776]\n  return\n}\n"),
            "t.ir: field 'line 2, column 27': shape fp16[1099511627776, 1099511627776] has too many elements");
  EXPECT_EQ(parse_error("graph g {\n  %w = const splat<0.0> : fp16[1073741824]\n  return\n}\n"),
            "t.ir: field 'line 2, column 20': constant 'w' of type fp16[1073741824] is larger than 1 GiB");
}

// Every prefix of a valid text, and every single-byte corruption of it, is either a graph or an
// orion::Error — never a crash or another exception.
TEST(IrText, DamagedTextsFailCleanly) {
  const std::string text = kFfn;
  int parsed = 0, errors = 0;
  auto attempt = [&](const std::string& t) {
    try {
      parse_graph(t);
      parsed++;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input);
      EXPECT_NE(e.context().field.find("line "), std::string::npos) << e.what();
      errors++;
    }
  };
  for (size_t n = 0; n < text.size(); n++) attempt(text.substr(0, n));
  for (size_t i = 0; i < text.size(); i++)
    for (char c : {'\0', '%', '#', '"', '[', '-', '9', 'x', '\n', '}'}) {
      std::string t = text;
      t[i] = c;
      attempt(t);
    }
  EXPECT_GT(errors, int(text.size()));
  EXPECT_GT(parsed, 0);  // e.g. the text minus its final line break, or a renamed node
}

TEST(IrText, OddNamesAreQuoted) {
  Graph g("my graph");
  Value x = g.input("x", {ElemType::F16, {1}});
  g.add_output("out put", x);
  std::string text = print_graph(g);
  EXPECT_EQ(text, "graph \"my graph\" {\n  %x = input : fp16[1]\n  return %\"out put\" = %x\n}\n");
  expect_same(g, parse_graph(text));
}

}  // namespace
}  // namespace orion::ir
