// anesim's check of a program's BLOBFILE constants, independent of the compiler's MIL parser and
// blob reader: it finds each `tensor<T, [dims]>(BLOBFILE(path = string("P"), offset = uint64(N)))`
// in the MIL text itself, and reads P from the weight dictionary with anesim's own storage reader
// (milblob_storage.h), which reaches records from the header as coremltools' reader does. The
// offset must name a reachable record (C8) whose data type and byte size are those of T and dims.
#pragma once
#include <string>
#include <string_view>

#include "runtime/driver.h"

namespace orion::runtime::anesim {

// Input error naming `source` (the MIL text's name) and the line of the first bad constant.
void check_blobfile_constants(std::string_view mil_text, const WeightDict& weights, const std::string& source);

}  // namespace orion::runtime::anesim
