// A compiled program: what the compiler hands to a driver (the real ANE or anesim) — MIL text, the
// weight dictionary, and the binding tables that say which buffer goes with which MIL name.
//
// The hardware binds inputs and outputs in the ALPHABETICAL order of their MIL names, not in the
// order the function declares them (rule C6), and wants every input buffer the same allocation
// size (C13), every output buffer the same allocation size (C5), and no buffer smaller than the
// chip's minimum (C7). A BindingTable is therefore sorted by name and carries the one allocation
// size every buffer of its side must have.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/chip.h"
#include "ir/graph.h"

namespace orion::compiler {

struct Binding {
  std::string name;         // MIL name (function parameter or returned value)
  ir::Type type;            // element type and shape
  int64_t bytes = 0;        // packed size of the data: numel × element size
  int64_t alloc_bytes = 0;  // allocation size of the buffer (the table's uniform size)
  int declared_index = 0;   // position in the function signature / return list
  std::string layout;       // e.g. "[1, C, 1, S] fp16, channel-major, packed from byte 0 (C14)"
};

struct BindingTable {
  std::vector<Binding> bindings;  // sorted by name, byte-wise (C6)
  int64_t alloc_bytes = 0;        // every buffer of this side: max(largest bytes, C7 minimum), aligned

  const Binding* find(const std::string& name) const;  // nullptr when absent
  std::vector<std::string> names() const;              // in binding order
};

// Builds a table from (name, type) in declaration order: sorts by name (C6), computes the uniform
// allocation size (C5/C13) — the largest packed size, raised to the chip's minimum buffer (C7) and
// rounded up to its buffer alignment.
BindingTable make_binding_table(const std::vector<std::pair<std::string, ir::Type>>& declared, const ChipProfile& chip);

// The key a weight file has in the weight dictionary and in BLOBFILE paths.
inline std::string weight_key(const std::string& file) { return "@model_path/weights/" + file; }
constexpr const char* kWeightKeyPrefix = "@model_path/weights/";

struct CompiledProgram {
  std::string name;      // the graph's name
  std::string chip;      // profile name the text was emitted for
  std::string mil_text;  // UTF-8 (C19)
  // Weight dictionary: "@model_path/weights/<file>.bin" → MILBlob v2 file image. Empty, never
  // absent, for a weight-free program (C19).
  std::map<std::string, std::vector<uint8_t>> weights;
  BindingTable inputs, outputs;
  // Constants by storage, for rule C16 (≤ 16 BLOBFILE constants; validate-ane decides).
  int blob_constants = 0;       // graph constants stored as BLOBFILE weights
  int inline_constants = 0;     // graph constants written inline (scalars): each also costs a C16 slot
  int parameter_constants = 0;  // op parameters written as named consts (axes, strides, flags; C3)
};

// Writes <dir>/model.mil and <dir>/weights/<file>.bin (each atomically), creating the folders.
void save_program(const CompiledProgram& p, const std::string& dir);

}  // namespace orion::compiler
