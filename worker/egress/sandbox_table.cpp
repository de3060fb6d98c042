#include "worker/egress/sandbox_table.hpp"

#include <mutex>

#include "schema/assert.hpp"
#include "worker/egress/address_filter.hpp"

namespace airlock::worker::egress {

void sandbox_table::put(sandbox_view view) {
  auto address = parse_ipv4(view.address);
  AIRLOCK_ASSERT(address.has_value(), "sandbox address", view.address, view.sandbox_id);
  auto snapshot = std::make_shared<const sandbox_view>(std::move(view));
  std::unique_lock lock(mutex_);
  by_address_[*address] = std::move(snapshot);
}

void sandbox_table::remove(std::string_view address) {
  auto parsed = parse_ipv4(address);
  if (!parsed)
    return;
  std::unique_lock lock(mutex_);
  by_address_.erase(*parsed);
}

std::shared_ptr<const sandbox_view> sandbox_table::find(uint32_t address) const {
  std::shared_lock lock(mutex_);
  auto it = by_address_.find(address);
  return it == by_address_.end() ? nullptr : it->second;
}

size_t sandbox_table::size() const {
  std::shared_lock lock(mutex_);
  return by_address_.size();
}

} // namespace airlock::worker::egress
