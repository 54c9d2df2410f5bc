// The MIL parser's two stages meet here: parse_mil.cpp turns tokens into these statements (syntax,
// const values decoded, BLOBFILEs resolved); mil_build.cpp turns them into an IR graph (names,
// operands, op arguments, types).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/mil/mil_lexer.h"
#include "compiler/mil/mil_syntax.h"
#include "ir/graph.h"

namespace orion::compiler::mil {

struct MilType {
  bool is_string = false;
  ir::Type t;
  std::string str() const { return is_string ? "string" : type_str(t, false); }
};

struct MilArg {
  Token name;
  bool tuple = false;      // values = (a, b)
  std::vector<Token> ids;  // the named operands
};

// `T a[, T b] = op(args)[name = string("n")];` or `T n = const()[name = string("n"), val = ...];`
struct MilStmt {
  std::vector<std::pair<MilType, Token>> results;  // declared type, value name
  Token op;
  std::vector<MilArg> args;
  std::string name_attr;
  bool is_const = false;
  std::string str_value;                // string consts
  std::shared_ptr<ir::ConstData> data;  // every other const
};

struct MilProgram {
  std::string version, function_name, target;
  std::vector<std::pair<MilType, Token>> params;
  std::vector<MilStmt> stmts;
  std::vector<Token> returns;
};

// The IR graph of a parsed program; Input errors ("line L, column C: ...") naming `source`.
ir::Graph build_graph(const MilProgram& p, const std::string& source);

}  // namespace orion::compiler::mil
