// orion._core: the extension module the `orion` package (python/orion/__init__.py) wraps.
#include "base/error.h"
#include "bindings.h"

namespace orion::python {

void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

std::vector<int> token_vector(const py::array& tokens, const char* what) {
  if (tokens.ndim() < 1)
    throw_usage_error("must be an array of token ids, not a scalar", what);
  if (tokens.size() > 0 && tokens.dtype().kind() != 'i' && tokens.dtype().kind() != 'u')
    throw_usage_error("must hold integer token ids", what);
  auto ids = py::array_t<int, py::array::c_style | py::array::forcecast>::ensure(tokens);
  if (!ids) throw py::error_already_set();
  return std::vector<int>(ids.data(), ids.data() + ids.size());
}

py::array_t<float> float_array(const float* data, const std::vector<int64_t>& shape) {
  py::array_t<float> out(std::vector<py::ssize_t>(shape.begin(), shape.end()));
  std::copy(data, data + out.size(), out.mutable_data());
  return out;
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "Orion's C++ core: models, generation, training, LoRA and the ANE compiler (see the orion package).";
  m.attr("__version__") = "0.1.0";
  bind_errors(m);
  bind_model(m);
  bind_training(m);
  bind_compiler(m);
}

}  // namespace orion::python
