#include "e2b/envd_methods.hpp"

#include <optional>
#include <string>

#include "e2b/envd/filesystem/filesystem.pb.h"
#include "e2b/envd/process/process.pb.h"

namespace airlock::e2b {

namespace {

namespace pb = google::protobuf;

// Naming a generated message links its file's descriptors into the binary.
std::vector<const pb::ServiceDescriptor*> services() {
  return {process::StartRequest::descriptor()->file()->FindServiceByName("Process"),
          filesystem::StatRequest::descriptor()->file()->FindServiceByName("Filesystem")};
}

rpc_kind kind_of(const pb::MethodDescriptor& method) {
  if (method.client_streaming())
    return method.server_streaming() ? rpc_kind::bidi_stream : rpc_kind::client_stream;
  return method.server_streaming() ? rpc_kind::server_stream : rpc_kind::unary;
}

std::unique_ptr<pb::Message> new_message(const pb::Descriptor* type) {
  const auto* prototype = pb::MessageFactory::generated_factory()->GetPrototype(type);
  return std::unique_ptr<pb::Message>(prototype->New());
}

} // namespace

std::unique_ptr<pb::Message> envd_method::new_request() const {
  return new_message(descriptor->input_type());
}

std::unique_ptr<pb::Message> envd_method::new_response() const {
  return new_message(descriptor->output_type());
}

std::optional<envd_method> find_envd_method(std::string_view path) {
  if (!path.starts_with('/'))
    return std::nullopt;
  path.remove_prefix(1);
  auto slash = path.find('/');
  if (slash == std::string_view::npos)
    return std::nullopt;
  auto service_name = path.substr(0, slash);
  auto method_name = path.substr(slash + 1);
  for (const auto* service : services()) {
    if (service == nullptr || service->full_name() != service_name)
      continue;
    const auto* method = service->FindMethodByName(std::string(method_name));
    if (method == nullptr)
      return std::nullopt;
    return envd_method{method, kind_of(*method)};
  }
  return std::nullopt;
}

std::vector<envd_method> envd_methods() {
  std::vector<envd_method> all;
  for (const auto* service : services())
    for (int i = 0; service != nullptr && i < service->method_count(); ++i)
      all.push_back({service->method(i), kind_of(*service->method(i))});
  return all;
}

} // namespace airlock::e2b
