// The IR's text form: a printer and a parser, so graphs can be written, read and compared as text
// (golden pass tests, error tests, `--print-ir`). MLIR-like and line-based: one node per line, in the
// graph's (topological) order.
//
//   graph ffn {
//     %x = input : fp16[1, 64, 1, 16]
//     %w = const dense<"0x003C0040..."> : fp16[32, 64, 1, 1]
//     %s = const splat<1.5> : fp16[]
//     %y = conv1x1(%x, %w) : fp16[1, 32, 1, 16]
//     %p:2 = split(%y) {axis = 1, split_sizes = [16, 16]} : fp16[1, 16, 1, 16], fp16[1, 16, 1, 16]
//     %z = relu(%p#1) : fp16[1, 16, 1, 16]
//     return %out = %z, %first = %p#0
//   }
//
// Grammar (terminals in quotes; blanks and `// comments` may appear between any two tokens; every
// statement ends at a line break, blank lines are ignored):
//
//   graph      := "graph" name "{" NL { node NL } return NL "}" [NL]
//   name       := IDENT | STRING                         (STRING only when not an identifier)
//   node       := "%" IDENT [ ":" INT ] "=" body [ attrs ] ":" type { "," type }
//                   ":N" declares N ≥ 2 results (split); N must equal the number of types
//   body       := "input"
//               | "const" data
//               | OPNAME "(" value { "," value } ")"    (OPNAME: the IR text names of ops.def)
//   value      := "%" IDENT [ "#" INT ]                 ("#i" picks result i; required exactly
//                                                       when the node has several results)
//   data       := "dense<" STRING ">"                   STRING = "0x" + the raw bytes in memory
//                                                       order (little-endian, row-major), 2 hex
//                                                       digits per byte
//               | "splat<" scalar ">"                   every element equal to scalar
//               | "blob<" INT "bytes," "fnv1a=" HEX ">" printed only with PrintOptions::
//                                                       elide_constants_above; never parsed
//   attrs      := "{" attr { "," attr } "}"             keys in sorted order
//   attr       := IDENT "=" ( "true" | "false" | INT | FLOAT | STRING | "[" [ INT { "," INT } ] "]" )
//   type       := ELEM "[" [ INT { "," INT } ] "]"      ELEM: fp16 | fp32 | int32 | bool; "[]" = scalar
//   return     := "return" [ output { "," output } ]
//   output     := "%" ( IDENT | STRING ) "=" value
//
//   IDENT  [A-Za-z_][A-Za-z0-9_@]*      INT  -?[0-9]+
//   FLOAT  a number with "." or an exponent, or inf, -inf, nan (always printed with one of them)
//   STRING "..." with \" \\ and \XX (two hex digits) escapes
//
// Canonical form (what print_graph writes): two-space indent, ", " between list items, attrs in
// key order, a constant as splat when all its elements are bitwise equal (and not NaN), otherwise
// dense; floats in their shortest round-trip spelling. print_graph(parse_graph(t)) == t for every
// canonical t, and parse_graph(print_graph(g)) reproduces g's names, types, attributes, constant
// bytes, result counts, outputs and graph name.
//
// The result types written in the text are checked against shape inference: the parser builds
// each node with the Graph builder and a mismatch is an error naming the node. Every parse error
// is an orion::Error of kind Input whose context has file = the source name and field =
// "line L, column C" (1-based, columns in bytes), and whose message says what was expected.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace orion::ir {

struct PrintOptions {
  // Constants of more bytes than this print as blob<N bytes, fnv1a=0x...> (a summary that cannot be
  // parsed back). Unset: every constant prints in full.
  std::optional<size_t> elide_constants_above;
};

// The canonical text of g (dead nodes are skipped). Ends with "}\n".
std::string print_graph(const Graph& g, const PrintOptions& options = {});

// Parses one graph; `source_name` names the text in errors (a file path, or "<text>").
Graph parse_graph(std::string_view text, const std::string& source_name = "<text>");

// Reads and parses a file (Input error naming the path if it cannot be read).
Graph parse_graph_file(const std::string& path);

// 64-bit FNV-1a of a byte range (the checksum shown in blob<...>).
uint64_t fnv1a64(const uint8_t* data, size_t size);

}  // namespace orion::ir
