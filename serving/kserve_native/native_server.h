// The gRPC server of the native front end: one listening address, TLS or plaintext, message
// size limits and channel arguments as the Python gRPC server gets them, a bound on the RPCs
// held at once, and a graceful stop.
//
// Thread safety: Start once, then Stop from any thread (each at most once).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inference_service.h"

namespace tfpopef {
namespace kserve {

struct TlsOptions {
  std::string server_key, server_cert, custom_ca;
  bool client_verify = false;
};

struct ServerOptions {
  std::string address;  // host:port; port 0 picks a free one
  // RPCs held at once (each holds a thread of the synchronous server until answered); past
  // it gRPC answers RESOURCE_EXHAUSTED at once. 0: no bound.
  int max_concurrent_rpcs = 0;
  std::vector<std::pair<std::string, int>> int_arguments;  // channel arguments
  std::vector<std::pair<std::string, std::string>> string_arguments;
  std::optional<TlsOptions> tls;
};

class NativeServer {
 public:
  NativeServer(ModelTable& table, Delegate delegate, size_t max_message_chars)
      : service_(table, std::move(delegate), max_message_chars) {}
  ~NativeServer();

  // The bound port; throws std::runtime_error naming the address if it cannot be bound.
  int Start(const ServerOptions& options);
  // Refuses new RPCs and waits up to grace_s for running ones, then cancels them.
  void Stop(double grace_s);

 private:
  InferenceService service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace kserve
}  // namespace tfpopef
