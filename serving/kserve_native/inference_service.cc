#include "inference_service.h"

#include <chrono>

#include "fast_infer.h"

namespace tfpopef {
namespace kserve {
namespace {

// Seconds until the RPC's deadline (0 once it passed or the call was cancelled), < 0 for none.
double SecondsLeft(grpc::ServerContext* context) {
  if (context->IsCancelled()) return 0;
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return -1;
  const double left = std::chrono::duration<double>(deadline - std::chrono::system_clock::now()).count();
  return left > 0 ? left : 0;
}

}  // namespace

grpc::Status InferenceService::Forward(const char* method, grpc::ServerContext* context,
                                       const google::protobuf::Message& request, google::protobuf::Message* response) {
  std::string bytes, answer;
  request.SerializeToString(&bytes);
  grpc::Status status = delegate_(method, bytes, SecondsLeft(context), &answer);
  if (status.ok() && !response->ParseFromString(answer))
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string("the answer of ") + method + " does not parse");
  return status;
}

grpc::Status InferenceService::ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                                          inference::ModelInferResponse* response) {
  const std::shared_ptr<const ServedModel> model = table_.Find(request->model_name(), request->model_version());
  if (model && SecondsLeft(context) != 0) {
    grpc::Status status;
    if (FastInfer(*model, *request, response, &status, max_message_chars_) == FastResult::kAnswered) return status;
  }
  return Forward("ModelInfer", context, *request, response);
}

grpc::Status InferenceService::ModelStreamInfer(
    grpc::ServerContext*, grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*) {
  // The Python servicer's answer (a stream cannot be handed over as one request).
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "inference.GRPCInferenceService/ModelStreamInfer is not implemented by this server");
}

}  // namespace kserve
}  // namespace tfpopef
