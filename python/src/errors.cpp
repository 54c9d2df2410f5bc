// orion.Error: every orion::Error reaches Python as one exception whose text is the line the CLI
// prints after "orion: error: " — the same message, file, field and hint. Its kind picks the class:
//   UsageError (also a ValueError)  bad options or arguments      (CLI exit code 2)
//   InputError                      a malformed or missing file   (3)
//   Error                           runtime failures and bugs     (4, 5)
// Each carries .kind, .message, .file, .field, .hint and .exit_code.
#include <new>

#include "base/error.h"
#include "bindings.h"

namespace orion::python {
namespace {

const char* kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Usage: return "usage";
    case ErrorKind::Input: return "input";
    case ErrorKind::Runtime: return "runtime";
    case ErrorKind::Internal: return "internal";
  }
  return "runtime";
}

// The classes live as long as the interpreter (the module holds them too).
PyObject* g_error = nullptr;
PyObject* g_usage_error = nullptr;
PyObject* g_input_error = nullptr;

void raise_error(const Error& e) {
  PyObject* cls = e.kind() == ErrorKind::Usage ? g_usage_error : e.kind() == ErrorKind::Input ? g_input_error : g_error;
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", e.what()));
  if (!exc) return;  // the call set its own error
  exc.attr("kind") = kind_name(e.kind());
  exc.attr("message") = e.message();
  exc.attr("file") = e.context().file;
  exc.attr("field") = e.context().field;
  exc.attr("hint") = e.context().hint;
  exc.attr("exit_code") = exit_code(e.kind());
  PyErr_SetObject(cls, exc.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
  g_error = PyErr_NewExceptionWithDoc("orion.Error", "An error from Orion: the line the orion CLI prints for it.",
                                      PyExc_RuntimeError, nullptr);
  py::object bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_usage_error = PyErr_NewExceptionWithDoc("orion.UsageError", "Bad options or arguments (the CLI's exit code 2).",
                                            bases.ptr(), nullptr);
  g_input_error = PyErr_NewExceptionWithDoc("orion.InputError", "A malformed or missing input file (exit code 3).",
                                            g_error, nullptr);
  m.attr("Error") = py::handle(g_error);
  m.attr("UsageError") = py::handle(g_usage_error);
  m.attr("InputError") = py::handle(g_input_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_error(e);
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "out of memory (hint: use a smaller model, dtype='f16', or a shorter seq)");
    }
  });
}

}  // namespace orion::python
