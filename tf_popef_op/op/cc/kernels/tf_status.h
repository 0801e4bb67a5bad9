// Runtime errors as TF statuses, in one place: the status code follows the runtime's
// ErrorCode (bad shape/dtype/anchor/index -> INVALID_ARGUMENT, missing PopEF -> NOT_FOUND,
// incompatible IPU version -> FAILED_PRECONDITION, ...) and the message is the runtime's, which
// names the anchor, the expected and the given values.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

inline absl::Status ToTfStatus(const Error& e) {
  const std::string message = std::string("PopefExecute: ") + e.what();
  switch (e.code()) {
    case ErrorCode::kInvalidArgument: return absl::InvalidArgumentError(message);
    case ErrorCode::kNotFound: return absl::NotFoundError(message);
    case ErrorCode::kFailedPrecondition: return absl::FailedPreconditionError(message);
    case ErrorCode::kDeadlineExceeded: return absl::DeadlineExceededError(message);
    case ErrorCode::kUnimplemented: return absl::UnimplementedError(message);
    case ErrorCode::kResourceExhausted: return absl::ResourceExhaustedError(message);
    case ErrorCode::kDataLoss: return absl::DataLossError(message);
    case ErrorCode::kInternal: return absl::InternalError(message);
  }
  return absl::InternalError(message);
}

}  // namespace tfpopef
