// Runtime errors. Every failure the runtime reports is a tfpopef::Error carrying a status
// code, so the Python binding and the TF op can map it to the right exception / TF status
// in one place each.
#pragma once

#include <stdexcept>
#include <string>

namespace tfpopef {

enum class ErrorCode {
  kInvalidArgument,     // bad anchor name, dtype, shape, index, attribute
  kNotFound,            // missing file
  kFailedPrecondition,  // incompatible device / IPU version, memory does not fit
  kDeadlineExceeded,    // a request waited longer than allowed
  kUnimplemented,       // unsupported op or dtype
  kResourceExhausted,   // queue full, out of device memory
  kDataLoss,            // corrupted or truncated PopEF
  kInternal,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

inline const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case ErrorCode::kNotFound: return "NOT_FOUND";
    case ErrorCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case ErrorCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case ErrorCode::kUnimplemented: return "UNIMPLEMENTED";
    case ErrorCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case ErrorCode::kDataLoss: return "DATA_LOSS";
    case ErrorCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

}  // namespace tfpopef
