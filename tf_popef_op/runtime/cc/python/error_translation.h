// The one place where a tfpopef::Error becomes a Python exception: the class is chosen by
// tf_popef_op.runtime.errors.error_from_code (ErrorCode name -> exception class), so the
// Python hierarchy (InvalidArgumentError is also a ValueError, ...) is defined in Python.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {
namespace python {

inline void SetPythonError(const Error& e) {
  namespace py = pybind11;
  try {
    // Messages may quote bytes from a hostile file: decode like the Python reader (replace).
    const std::string what = e.what();
    py::object message = py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(what.data(), static_cast<Py_ssize_t>(what.size()), "replace"));
    if (!message) throw py::error_already_set();
    py::object exc =
        py::module_::import("tf_popef_op.runtime.errors").attr("error_from_code")(ErrorCodeName(e.code()), message);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (py::error_already_set&) {
    // The errors module is unavailable (e.g. the extension loaded outside its package).
    PyErr_SetString(PyExc_RuntimeError, (std::string(ErrorCodeName(e.code())) + ": " + e.what()).c_str());
  }
}

inline void RegisterErrorTranslator() {
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      SetPythonError(e);
    }
  });
}

}  // namespace python
}  // namespace tfpopef
