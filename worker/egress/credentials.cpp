#include "worker/egress/credentials.hpp"

#include <strings.h>

namespace airlock::worker::egress {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

/// Higher is more specific: exact names beat every wildcard; among
/// wildcards the longer suffix wins.
std::size_t specificity(std::string_view pattern) {
  if (pattern.starts_with("*."))
    return pattern.size();
  return 1'000'000;
}

int scope_rank(schema::credential_scope scope) {
  switch (scope) {
    case schema::credential_scope::sandbox: return 3;
    case schema::credential_scope::template_name: return 2;
    case schema::credential_scope::tenant: return 1;
  }
  return 0;
}

} // namespace

bool host_matches(std::string_view pattern, std::string_view host) {
  if (host.ends_with('.'))
    host.remove_suffix(1);
  if (!pattern.starts_with("*."))
    return iequals(pattern, host);
  auto suffix = pattern.substr(1); // ".a.b"
  return host.size() > suffix.size() && iequals(host.substr(host.size() - suffix.size()), suffix);
}

const schema::credential_grant* select_grant(const std::vector<schema::credential_grant>& grants,
                                             std::string_view host) {
  const schema::credential_grant* best = nullptr;
  int best_scope = 0;
  std::size_t best_specificity = 0;
  for (const auto& grant : grants) {
    std::size_t grant_specificity = 0;
    for (const auto& pattern : grant.hosts)
      if (host_matches(pattern, host))
        grant_specificity = std::max(grant_specificity, specificity(pattern));
    if (grant_specificity == 0 || grant.header.empty())
      continue;
    int rank = scope_rank(grant.scope);
    if (rank > best_scope || (rank == best_scope && grant_specificity > best_specificity)) {
      best = &grant;
      best_scope = rank;
      best_specificity = grant_specificity;
    }
  }
  return best;
}

std::shared_ptr<const credential_cache::grant_list>
credential_cache::find(const std::string& sandbox_id, clock::time_point now) const {
  std::lock_guard lock{mutex_};
  auto it = grants_.find(sandbox_id);
  if (it == grants_.end())
    return nullptr;
  if (now >= it->second.expires_at)
    return nullptr;
  return it->second.grants;
}

void credential_cache::store(const std::string& sandbox_id, grant_list grants,
                             clock::time_point now) {
  std::lock_guard lock{mutex_};
  if (grants_.size() >= options_.sandboxes_max && !grants_.contains(sandbox_id))
    grants_.clear();
  grants_[sandbox_id] = entry{std::make_shared<const grant_list>(std::move(grants)),
                              now + std::chrono::milliseconds(options_.ttl_ms)};
}

void credential_cache::store_failure(const std::string& sandbox_id, clock::time_point now) {
  std::lock_guard lock{mutex_};
  if (grants_.size() >= options_.sandboxes_max && !grants_.contains(sandbox_id))
    grants_.clear();
  grants_[sandbox_id] = entry{std::make_shared<const grant_list>(),
                              now + std::chrono::milliseconds(options_.failure_ttl_ms)};
}

void credential_cache::forget(const std::string& sandbox_id) {
  std::lock_guard lock{mutex_};
  grants_.erase(sandbox_id);
}

bool credential_cache::try_use(const schema::credential_grant& grant, clock::time_point now) {
  if (grant.rate_limit_per_min == 0)
    return true;
  std::lock_guard lock{mutex_};
  auto it = buckets_.find(grant.credential_id);
  if (it == buckets_.end() || it->second.per_minute() != grant.rate_limit_per_min) {
    if (it != buckets_.end())
      buckets_.erase(it);
    if (buckets_.size() >= options_.buckets_max)
      trim_buckets(now);
    it = buckets_.emplace(grant.credential_id, token_bucket{grant.rate_limit_per_min, now}).first;
  }
  return it->second.try_take(now);
}

void credential_cache::trim_buckets(clock::time_point now) {
  // A bucket that has refilled completely carries no state worth keeping.
  std::erase_if(buckets_, [now](const auto& item) { return item.second.is_full(now); });
  if (buckets_.size() >= options_.buckets_max)
    buckets_.clear();
}

} // namespace airlock::worker::egress
