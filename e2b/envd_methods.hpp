#pragma once
// envd's Connect methods as the SDKs address them: "/process.Process/Start",
// "/filesystem.Filesystem/Stat", ... Each is found in the descriptors that
// protoc generated from envd's .proto files (envd/), with its kind and a way
// to make its request and response messages, so that the server needs no
// second table of names.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace airlock::e2b {

/// How a method's messages flow.
enum class rpc_kind : uint8_t { unary, server_stream, client_stream, bidi_stream };

struct envd_method {
  const google::protobuf::MethodDescriptor* descriptor = nullptr;
  rpc_kind kind = rpc_kind::unary;

  /// "process.Process", "Start".
  std::string_view service() const { return descriptor->service()->full_name(); }
  std::string_view name() const { return descriptor->name(); }
  /// Empty messages of the method's request and response types.
  std::unique_ptr<google::protobuf::Message> new_request() const;
  std::unique_ptr<google::protobuf::Message> new_response() const;
};

/// The method at URL path `path` ("/process.Process/Start"); nullopt for any
/// other path (the server answers unimplemented).
std::optional<envd_method> find_envd_method(std::string_view path);

/// Every method of process.Process and filesystem.Filesystem.
std::vector<envd_method> envd_methods();

} // namespace airlock::e2b
