// ModelInfer on a registered bare-PopEF version, entirely in C++: inputs are read in place
// from `raw_input_contents`, run by the version's ModelRunner (a blocking call per gRPC
// thread; the runtime batches concurrent requests across threads), outputs written to
// `raw_output_contents`.
//
// A subgraph that runs each request alone (no `dynamic_batching`) gets the request's rows
// zero-padded to whole compiled batches, and answers the request's rows only, as the Python
// path does.
//
// The fast path only takes the well-formed case. Anything it does not fully accept (typed
// `contents`, parameters, a name / datatype / shape / size it would refuse, more rows than
// max_batch_size, padding along an axis other than the first, a deadline already passed)
// returns kDelegate untouched and uncounted, and the Python servicer answers it: errors and
// their messages are the Python server's by construction.
#pragma once

#include <grpcpp/grpcpp.h>

#include "grpc_service.pb.h"
#include "served_model.h"

namespace tfpopef {
namespace kserve {

enum class FastResult { kAnswered, kDelegate };

// On kAnswered, `response` or `status` (a runtime failure) is the RPC's answer, and the
// request was counted in model.counters. `max_message_chars` truncates error messages as the
// Python server does.
FastResult FastInfer(const ServedModel& model, const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response, grpc::Status* status,
                     size_t max_message_chars);

}  // namespace kserve
}  // namespace tfpopef
