#include "native_server.h"

#include <grpcpp/resource_quota.h>

#include <chrono>
#include <stdexcept>

namespace tfpopef {
namespace kserve {

NativeServer::~NativeServer() { Stop(0); }

int NativeServer::Start(const ServerOptions& options) {
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls) {
    grpc::SslServerCredentialsOptions ssl(options.tls->client_verify
                                              ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                              : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_root_certs = options.tls->custom_ca;
    ssl.pem_key_cert_pairs.push_back({options.tls->server_key, options.tls->server_cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, credentials, &port);
  builder.RegisterService(&service_);
  builder.SetMaxReceiveMessageSize(INT32_MAX);
  builder.SetMaxSendMessageSize(INT32_MAX);
  for (const auto& [key, value] : options.int_arguments) builder.AddChannelArgument(key, value);
  for (const auto& [key, value] : options.string_arguments) builder.AddChannelArgument(key, value);
  if (options.max_concurrent_rpcs > 0) {
    // A synchronous server runs each RPC on a thread of its own; its pollers take threads too.
    constexpr int kPollers = 2;
    grpc::ResourceQuota quota("kserve-native");
    quota.SetMaxThreads(options.max_concurrent_rpcs + kPollers);
    builder.SetResourceQuota(quota);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kPollers);
  }
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    server_.reset();
    throw std::runtime_error("cannot bind the native KServe v2 gRPC listener to " + options.address);
  }
  return port;
}

void NativeServer::Stop(double grace_s) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(grace_s * 1e6)));
  server_->Wait();
  server_.reset();
}

}  // namespace kserve
}  // namespace tfpopef
