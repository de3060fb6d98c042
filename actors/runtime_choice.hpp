#pragma once
// Which runtime a sandbox runs in (API.md: `"runtime": "namespace|microvm"`).
// The choice travels in the sandbox's metadata under `airlock.runtime`, as a
// pool member's pool does under `airlock.pool`: the sandbox record, the
// scheduler's placement and the cluster protocol stay as they are. Only a
// microvm sandbox carries the key; a sandbox without it is a namespace one.
// The gateway writes it at create, the registry keeps it across a metadata
// PATCH, the worker reads it when it starts the sandbox.

#include <string>
#include <string_view>

#include "schema/sandbox.hpp"

namespace airlock::actors {

/// The metadata key that names a sandbox's runtime when it is not namespace.
inline constexpr const char* runtime_metadata_key = "airlock.runtime";
inline constexpr std::string_view namespace_runtime_name = "namespace";
inline constexpr std::string_view microvm_runtime_name = "microvm";

/// True for a runtime name this build knows.
inline bool is_runtime_name(std::string_view name) {
  return name == namespace_runtime_name || name == microvm_runtime_name;
}

/// The runtime `spec` names: its metadata's airlock.runtime, else namespace.
inline std::string runtime_of(const schema::sandbox_spec& spec) {
  auto found = spec.metadata.find(runtime_metadata_key);
  return found == spec.metadata.end() || found->second.empty() ? std::string(namespace_runtime_name)
                                                               : found->second;
}

/// Records `runtime` in `spec` (namespace: no key, as before runtimes were chosen).
inline void set_runtime(schema::sandbox_spec& spec, std::string_view runtime) {
  if (runtime == namespace_runtime_name || runtime.empty())
    spec.metadata.erase(runtime_metadata_key);
  else
    spec.metadata[runtime_metadata_key] = std::string(runtime);
}

} // namespace airlock::actors
