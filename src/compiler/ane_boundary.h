// What legalize-ane decided about a program's boundary that the runtime must carry out (DESIGN.md
// §2, rules C1, C5, C7, C13, C18). The graph can only change what the program declares; filling and
// sizing the buffers is the runtime's job, so legalize-ane records here what it changed and what the
// buffers must look like, and PassContext carries it to the emitter's manifest and to the runtime.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace orion::compiler {

// C1: a concat that fed graph outputs became one output per operand; the runtime concatenates the
// parts along `axis` to rebuild the original output.
struct OutputSplit {
  std::string output;              // the original output name
  int64_t axis = 0;                // the concat axis (non-negative)
  std::vector<std::string> parts;  // the new outputs, in concat order
};

// A boundary tensor whose declared type legalize-ane changed.
//   inputs:  the runtime writes data of type `original` into a buffer of type `legalized`
//            (zeros after the original sequence positions; fp32 converted to fp16);
//   outputs: the runtime reads `legalized` and hands back `original` (the first S sequence
//            positions; fp16 converted to fp32).
struct BoundaryChange {
  std::string name;  // input node name, or output name
  bool is_input = true;
  ir::Type original, legalized;
  std::vector<std::string> rules;  // "C7" (sequence padded to the minimum buffer), "C18" (demoted to fp16)
};

struct AneBoundary {
  std::vector<OutputSplit> output_splits;
  std::vector<BoundaryChange> changes;
  // C13 / C5: every input (output) buffer is allocated with this many bytes: the largest input
  // (output) of the program, at least the minimum buffer (C7), rounded up to the chip's buffer
  // alignment. Data sits packed at offset 0 (C14).
  int64_t input_alloc_bytes = 0;
  int64_t output_alloc_bytes = 0;

  const BoundaryChange* find_change(const std::string& name, bool is_input) const {
    for (const BoundaryChange& c : changes)
      if (c.name == name && c.is_input == is_input) return &c;
    return nullptr;
  }
};

}  // namespace orion::compiler
