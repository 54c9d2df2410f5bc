// The public definitions anesim checks a MIL program against, independently of the compiler's
// own validation: which program versions carry which opsets, and each op's inputs (name, type,
// const-ness, per opset) — data transcribed from coremltools' op definitions, in
// mil_signatures.inc. A chip takes the program versions and opsets up to its own (chip.h, C18).
#pragma once
#include <string>
#include <vector>

#include "compiler/chip.h"
#include "runtime/anesim/mil_scan.h"

namespace orion::runtime::anesim {

// "" when program(V) with func main<OPSET> is a pairing the public definitions know and the chip
// accepts both; otherwise why not.
std::string version_problem(const std::string& program_version, const std::string& opset,
                            const compiler::ChipProfile& chip);

// Every way the scanned program breaks an op signature of its opset, one message per problem
// ("line 7: conv 'y': input 'strides' must be a const ('st' is made by relu)"); empty when none.
std::vector<std::string> signature_problems(const MilScan& m);

// The op names the table defines for an opset ("ios18"), sorted.
std::vector<std::string> ops_of_opset(const std::string& opset);

}  // namespace orion::runtime::anesim
