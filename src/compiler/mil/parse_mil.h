// MIL parser: MIL text (as emit_mil writes it, for every chip profile) back into the IR.
//
// What it reads: `program(V)`, an optional `[buildInfo = dict<string, string>({...})]`, and one
// `func NAME<TARGET>(params) { statements } -> (results);`. Statements are consts
// (`T n = const()[name = string("n"), val = LITERAL];`, LITERAL inline — concise or verbose
// (C18) — or BLOBFILE) and ops (`T y = conv(... = ...)[name = string("y")];`, several `T v` before
// `=` for split). Op arguments map to IR inputs and attributes through the table of mil_syntax.h:
// a const that is only ever used as an op parameter (axes, perm, strides, transpose flags, ...)
// becomes an attribute of that op; a const used as data (or not at all) becomes an IR const.
// So emit → parse → emit gives the same text and blobs, byte for byte.
//
// BLOBFILE constants are read from `weights` (keys "@model_path/weights/<file>.bin", values
// MILBlob v2 images) through the blob reader; the offset must name a metadata record (C8).
//
// Every problem is an Input error naming `source_name` and "line L, column C: ..." with what was
// expected; no input makes it crash or loop.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace orion::compiler {

using WeightDict = std::map<std::string, std::vector<uint8_t>>;

struct ParsedMil {
  ir::Graph graph;
  std::string program_version;  // "1.3"
  std::string function_name;    // "main"
  std::string function_target;  // "ios18"
};

ParsedMil parse_mil_program(std::string_view text, const WeightDict& weights, const std::string& source_name);
ir::Graph parse_mil(std::string_view text, const WeightDict& weights, const std::string& source_name);

}  // namespace orion::compiler
