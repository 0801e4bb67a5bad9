// numpy <-> HostTensor conversion for the bindings. Inputs accept array-likes (converted with
// numpy.asarray, never changing the dtype; non-contiguous arrays are copied); outputs must
// be real, C-contiguous, writeable ndarrays because the runtime fills them in place.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "tf_popef_op/runtime/cc/base/dtype.h"
#include "tf_popef_op/runtime/cc/base/host_tensor.h"

namespace tfpopef {
namespace python {

namespace py = pybind11;

inline std::string DescribeDType(const py::dtype& dt) {
  return py::str(static_cast<const py::handle&>(dt)).cast<std::string>();
}

// The PopEF dtype of a numpy dtype; kInvalidArgument naming `what` if there is none.
inline DType ToDType(const py::dtype& dt, const std::string& what) {
  const char order = dt.byteorder();
  constexpr char kHostOrder = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '<' : '>';
  const bool native = order == '=' || order == '|' || order == kHostOrder;
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (native) {
    switch (kind) {
      case 'f':
        if (size == 2) return DType::kFloat16;
        if (size == 4) return DType::kFloat32;
        if (size == 8) return DType::kFloat64;
        break;
      case 'i':
        if (size == 1) return DType::kInt8;
        if (size == 2) return DType::kInt16;
        if (size == 4) return DType::kInt32;
        if (size == 8) return DType::kInt64;
        break;
      case 'u':
        if (size == 1) return DType::kUInt8;
        if (size == 2) return DType::kUInt16;
        if (size == 4) return DType::kUInt32;
        if (size == 8) return DType::kUInt64;
        break;
      case 'b':
        if (size == 1) return DType::kBool;
        break;
      default: break;
    }
  }
  throw Error(ErrorCode::kInvalidArgument, what + ": numpy dtype " + DescribeDType(dt) +
                                               " has no PopEF equivalent (supported: float16/32/64, int8..64, "
                                               "uint8..64, bool, in native byte order)");
}

inline py::dtype ToNumpy(DType t) { return py::dtype(std::string(DTypeName(t))); }

inline std::vector<int64_t> ShapeOf(const py::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

// An input value as a C-contiguous array (kept alive by the caller) and its HostTensor.
inline py::array AsInputArray(const py::handle& value) {
  // Leaked on purpose: a static py::object would be released after Python finalized.
  static py::object& asarray = *new py::object(py::module_::import("numpy").attr("asarray"));
  static py::object& ascontiguousarray = *new py::object(py::module_::import("numpy").attr("ascontiguousarray"));
  py::array arr = asarray(value).cast<py::array>();
  if (!(arr.flags() & py::array::c_style)) arr = ascontiguousarray(arr).cast<py::array>();
  return arr;
}

inline HostTensor InputTensor(const std::string& name, const py::array& arr) {
  return HostTensor{name, ToDType(arr.dtype(), "input '" + name + "'"), ShapeOf(arr), const_cast<void*>(arr.data())};
}

inline HostTensor OutputTensor(const std::string& name, const py::handle& value) {
  const std::string what = "output '" + name + "'";
  if (!py::isinstance<py::array>(value))
    throw Error(ErrorCode::kInvalidArgument, what + ": expected a numpy.ndarray to fill in place, got " +
                                                 py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  py::array arr = py::reinterpret_borrow<py::array>(value);
  if (!(arr.flags() & py::array::c_style))
    throw Error(ErrorCode::kInvalidArgument, what + ": the array must be C-contiguous to be filled in place");
  if (!arr.writeable()) throw Error(ErrorCode::kInvalidArgument, what + ": the array is read-only");
  return HostTensor{name, ToDType(arr.dtype(), what), ShapeOf(arr), arr.mutable_data()};
}

}  // namespace python
}  // namespace tfpopef
