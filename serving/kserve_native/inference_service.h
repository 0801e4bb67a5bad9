// inference.GRPCInferenceService served from C++: ModelInfer takes the fast path (fast_infer.h)
// for the versions in the ModelTable; every other request and RPC is handed, serialized, to
// the Python servicer through one Delegate call, so its answers are the Python server's.
//
// Thread safety: the gRPC server calls the methods from its threads concurrently.
#pragma once

#include <functional>
#include <string>

#include "grpc_service.grpc.pb.h"
#include "model_table.h"

namespace tfpopef {
namespace kserve {

// (method name, serialized request, seconds left before the deadline or < 0 for none)
// -> status; on OK `response` holds the serialized answer.
using Delegate = std::function<grpc::Status(const char* method, const std::string& request, double timeout_s,
                                            std::string* response)>;

class InferenceService final : public inference::GRPCInferenceService::Service {
 public:
  InferenceService(ModelTable& table, Delegate delegate, size_t max_message_chars)
      : table_(table), delegate_(std::move(delegate)), max_message_chars_(max_message_chars) {}

#define TFPOPEF_DELEGATED_RPC(Method)                                                                  \
  grpc::Status Method(grpc::ServerContext* context, const inference::Method##Request* request,         \
                      inference::Method##Response* response) override {                               \
    return Forward(#Method, context, *request, response);                                            \
  }
  TFPOPEF_DELEGATED_RPC(ServerLive)
  TFPOPEF_DELEGATED_RPC(ServerReady)
  TFPOPEF_DELEGATED_RPC(ModelReady)
  TFPOPEF_DELEGATED_RPC(ServerMetadata)
  TFPOPEF_DELEGATED_RPC(ModelMetadata)
  TFPOPEF_DELEGATED_RPC(ModelConfig)
  TFPOPEF_DELEGATED_RPC(ModelStatistics)
  TFPOPEF_DELEGATED_RPC(RepositoryIndex)
  TFPOPEF_DELEGATED_RPC(RepositoryModelLoad)
  TFPOPEF_DELEGATED_RPC(RepositoryModelUnload)
  TFPOPEF_DELEGATED_RPC(SystemSharedMemoryStatus)
  TFPOPEF_DELEGATED_RPC(SystemSharedMemoryRegister)
  TFPOPEF_DELEGATED_RPC(SystemSharedMemoryUnregister)
  TFPOPEF_DELEGATED_RPC(CudaSharedMemoryStatus)
  TFPOPEF_DELEGATED_RPC(CudaSharedMemoryRegister)
  TFPOPEF_DELEGATED_RPC(CudaSharedMemoryUnregister)
  TFPOPEF_DELEGATED_RPC(TraceSetting)
  TFPOPEF_DELEGATED_RPC(LogSettings)
#undef TFPOPEF_DELEGATED_RPC

  grpc::Status ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override;

  grpc::Status ModelStreamInfer(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>* stream) override;

 private:
  grpc::Status Forward(const char* method, grpc::ServerContext* context, const google::protobuf::Message& request,
                       google::protobuf::Message* response);

  ModelTable& table_;
  Delegate delegate_;
  size_t max_message_chars_;
};

}  // namespace kserve
}  // namespace tfpopef
