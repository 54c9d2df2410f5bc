// anesim's own reading of MIL text — not the compiler's parser — for the checks the hardware's
// compiler makes before anything else: the program and opset versions, the op signatures
// (mil_signatures.h) and the hardware's handling of sdpa (C15). It reads the one-statement-per-line
// form the ANE's own tools and every public ANE project write:
//   program(1.3)
//   [buildInfo = ...]
//   {
//       func main<ios18>(tensor<fp16, [1, 768, 1, 64]> x, ...) {
//           tensor<int32, [2]> st = const()[name = string("st"), val = ...];
//           tensor<fp16, [1, 768, 1, 64]> y = conv(strides = st, weight = W, x = x)[name = string("y")];
//           tensor<fp16, [...]> a, tensor<fp16, [...]> b = split(...)[name = string("s")];
//       } -> (y);
//   }
// It keeps only what those checks need: each value's type and whether it is a const, and each
// op's name and named arguments (a name, or a tuple of names).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace orion::runtime::anesim {

struct MilValueType {
  std::string elem;  // "fp16", "int32", "bool", "string", ...
  std::vector<int64_t> shape;
  bool tensor = false;  // written tensor<...> (a scalar may be written either way)
};

struct MilArg {
  std::string name;                 // "x"
  std::vector<std::string> values;  // one name, or the names of a tuple
  bool tuple = false;
};

struct MilStatement {
  int line = 0;
  std::string op;  // "const", "conv", ...
  std::vector<std::pair<std::string, MilValueType>> results;
  std::vector<MilArg> args;  // empty for const
};

struct MilScan {
  std::string program_version;  // "1.3"
  std::string function_target;  // "ios18"
  std::vector<std::pair<std::string, MilValueType>> params;
  std::vector<MilStatement> statements;
  std::map<std::string, size_t> producer;  // value name -> index of its statement (none for params)
};

// Reads the text; an Input error naming `source` and the line for anything it cannot read.
MilScan scan_mil(std::string_view text, const std::string& source);

}  // namespace orion::runtime::anesim
