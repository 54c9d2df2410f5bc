// MIL parser on text it did not write and on hostile input: other spellings parse; every error is
// an orion::Error naming the source and "line L, column C" with what was expected; truncated,
// mutated and absurd input never crashes or hangs.
#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "compiler/blob/blob_file.h"
#include "compiler/mil/emit_mil.h"
#include "compiler/mil/parse_mil.h"
#include "mil_test_graphs.h"
#include "support.h"

namespace orion::compiler {
namespace {

using ir::Op;

// A small program written by hand in the looser style other tools use: no spaces, a hex float,
// a name attribute that differs from the value's name, a comment, a verbose scalar.
const std::string kHand = R"(program(1.3)
[buildInfo = dict<string, string>({})]
{
  func main<ios18>(tensor<fp16, [1, 8, 1, 16]> x) {
    fp16 s = const()[name=string("s"), val=fp16(0x1p-4)];  // 1/16
    tensor<fp16, []> t = const()[name = string("t"), val = tensor<fp16, []>(-2.5)];
    tensor<fp16, [1,8,1,16]> y = mul(x=x,y=s)[name=string("y_op")];
    tensor<fp16, [1, 8, 1, 16]> z = add(x = y, y = t)[name = string("z")];
  } -> (z);
}
)";

// "line L, column C" of the first occurrence of `needle` in `text` (1-based).
std::string where(const std::string& text, const std::string& needle) {
  size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  if (at == std::string::npos) return "(not found)";
  int line = 1, col = 1;
  for (size_t i = 0; i < at; i++) text[i] == '\n' ? (line++, col = 1) : col++;
  return fmt::format("line {}, column {}", line, col);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

// The error parsing `text` raises; "" when it parses. Fails the test on anything but orion::Error.
std::string parse_error(const std::string& text, const WeightDict& w = {}) {
  try {
    parse_mil(text, w, "bad.mil");
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_EQ(e.context().file, "bad.mil");
    return e.what();
  }
}

void expect_error(const std::string& text, const std::string& at, const std::string& message, const WeightDict& w = {}) {
  std::string m = parse_error(text, w);
  EXPECT_NE(m.find("bad.mil: " + at + ": "), std::string::npos) << "wanted position " << at << " in: " << m;
  EXPECT_NE(m.find(message), std::string::npos) << "wanted '" << message << "' in: " << m;
}

TEST(MilParse, ReadsOtherSpellings) {
  ir::Graph g = parse_mil(kHand, {}, "hand.mil");
  EXPECT_EQ(g.verify(), "");
  int y = g.find("y");  // the value's name, not the name attribute, is the IR name
  ASSERT_GE(y, 0);
  EXPECT_EQ(g.node(y).op, Op::Mul);
  const ir::Node& s = g.node(g.find("s"));
  uint16_t h;
  std::memcpy(&h, s.data->bytes.data(), 2);
  EXPECT_EQ(h, 0x2C00);  // fp16 0.0625
  EXPECT_TRUE(g.node(g.find("t")).results[0].shape.empty());
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0].name, "z");
}

TEST(MilParse, SyntaxErrorsSayWhereAndWhatWasExpected) {
  expect_error("", "line 1, column 1", "expected 'program', found end of input");
  std::string cut = kHand.substr(0, kHand.find("y=s)"));  // truncated mid-call
  expect_error(cut, where(kHand, "y=s)"), "expected an argument name, found end of input");
  std::string t = replace(kHand, "y=s)[", "y=s][");
  expect_error(t, where(t, "]["), "expected ')', found ']'");
  t = replace(kHand, "} -> (z);", "} -> (z)");
  expect_error(t, "line 10, column 1", "expected ';', found '}'");
  t = kHand + "func";
  expect_error(t, "line 11, column 1", "expected end of input, found 'func'");
  expect_error(replace(kHand, "string(\"t\")", "string(\"t)"), where(kHand, "\"t\""), "unterminated string");
  expect_error(replace(kHand, "x=x,", "x=$x,"), where(kHand, "x,y=s"), "unexpected character '$'");
  expect_error(replace(kHand, "y=s)", "y=2.0)"), where(kHand, "s)[name"),
               "expected a value name (MIL operands are named values, C3), found '2.0'");
  t = replace(kHand, "[1,8,1,16]>", "[1,8,1,16>");
  expect_error(t, where(t, "> y = mul"), "expected ']', found '>'");
}

TEST(MilParse, SemanticErrorsNameTheStatement) {
  expect_error(replace(kHand, "mul(x=x", "mull(x=x"), where(kHand, "mul(x=x"), "unknown MIL op 'mull'");
  expect_error(replace(kHand, "add(x = y, y = t)", "add(x = y)"), where(kHand, "add(x = y"), "add needs argument 'y'");
  std::string t = replace(kHand, "mul(x=x,y=s)", "mul(x=x,y=s,alpha=s)");
  expect_error(t, where(t, "alpha"), "mul has no argument 'alpha' (expected: x, y)");
  expect_error(replace(kHand, "add(x = y", "add(x = w"), where(kHand, "y, y = t"), "undefined identifier 'w'");
  expect_error(replace(kHand, "add(x = y", "add(x = z"), where(kHand, "y, y = t"),
               "undefined identifier 'z'");  // own result
  expect_error(replace(kHand, "mul(x=x,y=s)", "mul(x=x,x=s)"), where(kHand, "y=s)"), "argument 'x' is given twice");
  expect_error(replace(kHand, "tensor<fp16, []> t =", "tensor<fp16, []> s ="), where(kHand, "t = const"),
               "'s' is defined twice");
  t = replace(kHand, "tensor<fp16, [1, 8, 1, 16]> z", "tensor<fp16, [1, 8, 1, 8]> z");
  expect_error(t, where(t, "z = add"),
               "'z' is declared tensor<fp16, [1, 8, 1, 8]>, but add gives tensor<fp16, [1, 8, 1, 16]>");
  expect_error(replace(kHand, "val=fp16(0x1p-4)", "val=fp32(0.5)"), where(kHand, "fp16(0x1p-4)"),
               "value type fp32 differs from the declared type fp16");
  expect_error(replace(kHand, "val=fp16(0x1p-4)", "val=fp16(half)"), where(kHand, "0x1p-4"),
               "expected fp16 value, found 'half'");
  expect_error(replace(kHand, "-> (z)", "-> (z, z)"), "line 9, column 12", "'z' is returned twice");
  expect_error(replace(kHand, "fp16, [1, 8, 1, 16]> x", "int8, [1, 8, 1, 16]> x"), where(kHand, "fp16, [1, 8, 1, 16]> x"),
               "unsupported element type 'int8'");
}

TEST(MilParse, HugeOrEmptyDimensionsAreRefused) {
  expect_error(replace(kHand, "[1, 8, 1, 16]> x", "[1, 99999999999, 1, 16]> x"), where(kHand, "8, 1, 16]> x"),
               "a dimension 99999999999 is too large");
  std::string t = replace(kHand, "[1, 8, 1, 16]> x", "[2147483647, 2147483647, 16]> x");
  expect_error(t, where(t, "2147483647, 16"), "more than 2^40 elements");  // the second dimension overflows
  std::string big = replace(
      kHand, "    fp16 s = const()",
      "    tensor<int32, [3]> sh = const()[name = string(\"sh\"), val = tensor<int32, [3]>([2147483647, 2147483647, -1])];\n"
      "    tensor<fp16, [1, 8, 1, 16]> rs = reshape(shape = sh, x = x)[name = string(\"rs\")];\n    fp16 s = const()");
  expect_error(big, where(big, "sh, x = x"), "'sh' asks for more than 2^40 elements");
  expect_error(replace(kHand, "[1, 8, 1, 16]> x", "[1, 0, 1, 16]> x"), where(kHand, "8, 1, 16]> x"),
               "dimensions must be positive");
  expect_error(replace(kHand, "[1, 8, 1, 16]> x", "[1, -8, 1, 16]> x"), where(kHand, "8, 1, 16]> x"),
               "expected a dimension");
  expect_error(replace(kHand, "[1, 8, 1, 16]> x", "[1,1,1,1,1,1,1,1,1]> x"), "line 4, column 50",
               "rank above 8");  // the ninth
}

TEST(MilParse, ConstValuesAreChecked) {
  std::string base = replace(
      kHand, "    fp16 s = const()",
      "    tensor<int32, [2]> v = const()[name = string(\"v\"), val = tensor<int32, [2]>([1, 2, 3])];\n    fp16 s = const()");
  expect_error(base, where(base, "3])"), "more values than tensor<int32, [2]> holds (2)");
  base = replace(
      kHand, "    fp16 s = const()",
      "    tensor<int32, [3]> v = const()[name = string(\"v\"), val = tensor<int32, [3]>([1, 2])];\n    fp16 s = const()");
  expect_error(base, where(base, "])]"), "tensor<int32, [3]> needs 3 values, found 2");
  base = replace(kHand, "    fp16 s = const()",
                 "    int32 v = const()[name = string(\"v\"), val = int32(4294967296)];\n    fp16 s = const()");
  expect_error(base, where(base, "4294967296"), "expected int32 value");
  expect_error(replace(kHand, "fp16 s = const()[name=string(\"s\"), val=fp16(0x1p-4)]",
                       "fp16 s = const()[name=string(\"s\")]"),
               where(kHand, "s = const"), "const 's' has no val");
}

// conv and reduce_sum with parameters that Orion's IR cannot hold, or that are not consts.
TEST(MilParse, OpParametersMustBeConstsOfTheSupportedValue) {
  std::string conv = emit_mil(test_graphs::linear(), default_chip()).mil_text;
  auto weights = emit_mil(test_graphs::linear(), default_chip()).weights;
  std::string strided = replace(conv, "proj_strides\"), val = tensor<int32, [2]>([1, 1])",
                                "proj_strides\"), val = tensor<int32, [2]>([2, 2])");
  expect_error(strided, where(strided, "proj_strides, weight"),
               "argument 'strides' of conv must be [1, 1] (Orion supports no other), 'proj_strides' is [2, 2]", weights);
  std::string typed = replace(conv, "groups = proj_groups", "groups = proj_pad");
  expect_error(typed, where(typed, "proj_pad, pad ="),
               "argument 'groups' of conv must be int32, 'proj_pad' is tensor<int32, [4]>", weights);
  std::string nonconst = replace(conv, "pad = proj_pad,", "pad = x,");
  expect_error(nonconst, where(nonconst, "x, pad_type"), "argument 'pad' of conv must name a const", weights);
}

TEST(MilParse, BlobfileProblemsPointAtTheConst) {
  auto p = emit_mil(test_graphs::linear(), default_chip());
  std::string c8 = replace(p.mil_text, "w.bin\"), offset = uint64(64)", "w.bin\"), offset = uint64(128)");
  expect_error(c8, where(c8, "128)))"), "does not point at a blob metadata record but at a blob's data", p.weights);
  EXPECT_NE(parse_error(c8, p.weights).find("rule C8"), std::string::npos);
  std::string missing = replace(p.mil_text, "weights/w.bin", "weights/nope.bin");
  expect_error(missing, where(missing, "BLOBFILE"),
               "weight file '@model_path/weights/nope.bin' is not in the weight dictionary", p.weights);
  auto corrupt = p.weights;
  corrupt["@model_path/weights/w.bin"][64] ^= 0xFF;  // the sentinel
  expect_error(p.mil_text, where(p.mil_text, "BLOBFILE"), "expected metadata sentinel 0xDEADBEEF", corrupt);
  auto swapped = p.weights;
  std::swap(swapped["@model_path/weights/w.bin"], swapped["@model_path/weights/b.bin"]);
  expect_error(p.mil_text, where(p.mil_text, "64)))"), "has 64 bytes, tensor<fp16, [32, 64, 1, 1]> needs 4096", swapped);
  auto fp32 = p.weights;
  fp32["@model_path/weights/b.bin"][68] = 2;  // dtype code fp32
  expect_error(p.mil_text, where(p.mil_text, "64)))];\n        tensor<int32"), "holds fp32, the const is fp16", fp32);
}

TEST(MilParse, TruncatedAndMutatedProgramsNeverCrash) {
  auto p = emit_mil(test_graphs::every_op(), chip_profile("m1"));
  const std::string& text = p.mil_text;
  size_t end = text.rfind('}');
  for (size_t n = 0; n < text.size(); n++) {
    std::string m = parse_error(text.substr(0, n), p.weights);
    if (n <= end) {
      ASSERT_NE(m, "") << "prefix of " << n << " bytes parsed";
    }
  }
  std::mt19937 rng(1234);
  const std::string alphabet = "()[]{}<>,=;-\"x0123456789.e tensor fp16 const BLOBFILE";
  int parsed = 0;
  for (int iter = 0; iter < 3000; iter++) {
    std::string m = text;
    for (int k = 0, edits = 1 + int(rng() % 3); k < edits; k++) {
      size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: m.erase(at, 1 + rng() % 8); break;
        default: m.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    if (parse_error(m, p.weights).empty()) parsed++;
  }
  EXPECT_LT(parsed, 3000);  // most mutations break the program
}

TEST(MilParse, AbsurdInputsAreErrorsNotHangs) {
  EXPECT_NE(parse_error(std::string(100000, '(')), "");
  EXPECT_NE(parse_error(std::string(100000, '[')), "");
  EXPECT_NE(parse_error("program(1.3) {" + std::string(50000, '{')), "");
  EXPECT_NE(parse_error(std::string("program(1.3)\n\0\n", 15)), "");
  std::string many = "program(1.3) { func main<ios18>(tensor<fp16, [1, 8, 1, 16]> x) {\n";
  for (int i = 0; i < 2000; i++)
    many += fmt::format("tensor<fp16, [1, 8, 1, 16]> r{} = relu(x = {})[name = string(\"r{}\")];\n", i,
                        i ? fmt::format("r{}", i - 1) : "x", i);
  EXPECT_EQ(parse_error(many + "} -> (r1999); }"), "");  // long programs are fine
  EXPECT_NE(parse_error(many + "} -> (r2000); }").find("undefined identifier 'r2000'"), std::string::npos);
}

}  // namespace
}  // namespace orion::compiler
