// Every runtime ErrorCode becomes the TF status code of the same name, with the runtime's
// message (prefixed by the op's name). Built and run by tests/op/test_tf_status_mapping.py.
#include <cstdio>
#include <string>

#include "tf_popef_op/op/cc/kernels/tf_status.h"

int main() {
  using tfpopef::Error;
  using tfpopef::ErrorCode;
  struct Case {
    ErrorCode runtime;
    absl::StatusCode tf;
  };
  const Case cases[] = {
      {ErrorCode::kInvalidArgument, absl::StatusCode::kInvalidArgument},
      {ErrorCode::kNotFound, absl::StatusCode::kNotFound},
      {ErrorCode::kFailedPrecondition, absl::StatusCode::kFailedPrecondition},
      {ErrorCode::kDeadlineExceeded, absl::StatusCode::kDeadlineExceeded},
      {ErrorCode::kUnimplemented, absl::StatusCode::kUnimplemented},
      {ErrorCode::kResourceExhausted, absl::StatusCode::kResourceExhausted},
      {ErrorCode::kDataLoss, absl::StatusCode::kDataLoss},
      {ErrorCode::kInternal, absl::StatusCode::kInternal},
  };
  int failures = 0;
  for (const Case& c : cases) {
    const std::string message = std::string("input 'graph0/X': ") + tfpopef::ErrorCodeName(c.runtime);
    const absl::Status s = tfpopef::ToTfStatus(Error(c.runtime, message));
    const bool ok = s.code() == c.tf && std::string(s.message()) == "PopefExecute: " + message;
    std::printf("%s %s -> %s '%s'\n", ok ? "ok  " : "FAIL", tfpopef::ErrorCodeName(c.runtime),
                absl::StatusCodeToString(s.code()).c_str(), std::string(s.message()).c_str());
    failures += ok ? 0 : 1;
  }
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
