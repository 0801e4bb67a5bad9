// One v2 model version the fast path may answer: a subgraph of a bare PopEF, as the Python
// server registered it (names, v2 datatypes and shapes the clients see, the anchors the
// runtime knows, batching), and the request counters of its (v2 name, version).
//
// Ownership: shares the ModelRunner with the Python servable (an in-flight request keeps it
// alive after an unload) and the Counters with the server's statistics table.
// Thread safety: immutable once built; Counters are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/dtype.h"
#include "tf_popef_op/runtime/cc/core/model_runner.h"

namespace tfpopef {
namespace kserve {

// The v2 datatype name of a runtime dtype ("FP32", ...) and back; false for names the
// runtime has no dtype for (BYTES).
const char* V2Datatype(DType dtype);
bool DTypeOfV2(const std::string& datatype, DType* dtype);

// Cumulative counts of one (v2 name, version), read by Python for ModelStatistics and
// /metrics. Durations in nanoseconds; the queue/compute ones of successful requests.
struct Counters {
  std::atomic<uint64_t> success{0}, success_ns{0}, fail{0}, fail_ns{0};
  std::atomic<uint64_t> rows{0};  // inferences (rows) of successful requests
  std::atomic<uint64_t> queue_ns{0}, input_ns{0}, infer_ns{0}, output_ns{0};
  std::atomic<int64_t> last_inference_ms{0};
  // Failed requests by canonical status code (the runtime's ErrorCode values).
  static constexpr int kCodes = 17;
  std::atomic<uint64_t> fail_by_code[kCodes] = {};
};

struct TensorSpec {
  std::string name;    // what clients call it
  std::string anchor;  // what the runtime calls it
  DType dtype;
  std::vector<int64_t> shape;  // -1 along the batch axis of a batched subgraph
};

// A constant extra input of the subgraph (a fused PopEF's `index`).
struct Feed {
  std::string anchor;
  DType dtype;
  std::vector<int64_t> shape;
  std::string data;
};

struct ServedModel {
  std::string model;    // the served model's name (TF Serving's metric label)
  std::string version;  // as v2 answers it
  std::shared_ptr<ModelRunner> runner;
  std::vector<TensorSpec> inputs, outputs;  // in the subgraph's order
  std::vector<Feed> feeds;
  int batch_axis = -1;          // -1: exact compiled shapes only
  int64_t batch_size = 0;       // rows per execution along batch_axis
  bool pack_requests = false;   // false: a request runs alone in whole compiled batches
  int64_t max_batch_size = 0;   // rows per request; 0: no limit
  int64_t max_tensor_bytes = 0; // one decoded input at most (--max_decoded_tensor_bytes)
  std::shared_ptr<Counters> counters;
};

}  // namespace kserve
}  // namespace tfpopef
