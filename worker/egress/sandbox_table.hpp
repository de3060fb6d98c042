#pragma once
// Who a connection or a DNS query belongs to. The egress proxy identifies a
// sandbox by the IPv4 source address of its packets (the host's nftables rules
// make that address unspoofable) and reads the sandbox's policy from here.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string_view>
#include <unordered_map>

#include "worker/egress/egress_types.hpp"

namespace airlock::worker::egress {

/// Thread-safe map from a sandbox's IPv4 address (host byte order) to an
/// immutable snapshot of what the egress proxy knows about it. Readers keep the
/// snapshot they found for the life of their connection, so a policy update
/// (put again) applies to new connections only.
class sandbox_table {
public:
  /// Adds or replaces the sandbox at `view.address`. Precondition: the
  /// address is a dotted IPv4 address (the worker assigned it).
  void put(sandbox_view view);

  /// Forgets the sandbox at `address` (dotted). Unknown addresses are ignored.
  void remove(std::string_view address);

  /// The sandbox whose address is `address` (host byte order), or null.
  std::shared_ptr<const sandbox_view> find(uint32_t address) const;

  size_t size() const;

private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<const sandbox_view>> by_address_;
};

} // namespace airlock::worker::egress
