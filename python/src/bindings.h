// The compiled half of the Python package (orion._core): one bind_<area>() per source file, and the
// helpers they share. Everything here is a thin layer over the C++ library — the same functions the
// `orion` command calls — so Python and the CLI compute the same bits.
//
// Threads and signals: long work (generation, training steps, compiling) runs with the GIL
// released. Between tokens or steps the binding takes the GIL back for a moment to run Python's
// signal handlers (PyErr_CheckSignals), so Ctrl-C raises KeyboardInterrupt at the next token.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

namespace orion::python {
namespace py = pybind11;

void bind_errors(py::module_& m);    // errors.cpp: orion.Error and its kinds
void bind_model(py::module_& m);     // model.cpp: load, generate, logits, tokenizer, adapters
void bind_training(py::module_& m);  // training.cpp: Trainer (full and LoRA)
void bind_compiler(py::module_& m);  // compiler.cpp: compile, mil_check

// With the GIL released: runs Python's pending signal handlers (GIL taken for the call) and throws
// py::error_already_set when one raised (KeyboardInterrupt for Ctrl-C). Main thread only has any
// effect, as in Python itself.
void check_signals();

// A row-major int32 copy of an array of token ids (any integer dtype).
std::vector<int> token_vector(const py::array& tokens, const char* what);

// A NumPy float32 array of `shape` holding a copy of `data`.
py::array_t<float> float_array(const float* data, const std::vector<int64_t>& shape);

}  // namespace orion::python
