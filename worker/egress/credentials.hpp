#pragma once
// Which credential a request gets, and the per-sandbox cache of grants and
// per-credential rate limits the egress proxy keeps in memory. Grant values
// are secrets: nothing here logs or copies them beyond the cache.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "schema/egress.hpp"
#include "worker/egress/token_bucket.hpp"

namespace airlock::worker::egress {

/// True when `pattern` (an exact name or "*.suffix") covers `host`. Names are
/// compared case-insensitively; "*.a.b" covers "x.a.b" and "x.y.a.b", not "a.b".
bool host_matches(std::string_view pattern, std::string_view host);

/// The grant a request to `host` carries: the narrowest scope (sandbox >
/// template > tenant) among grants whose hosts cover `host`, then the most
/// specific pattern (exact before wildcard, longer suffix first). nullptr: none.
const schema::credential_grant* select_grant(const std::vector<schema::credential_grant>& grants,
                                             std::string_view host);

struct credential_cache_options {
  /// How long fetched grants are used before fetching again. Default: 30000.
  uint32_t ttl_ms = 30000;
  /// After a failed fetch, requests go without credentials for this long
  /// before the next fetch, so that a control plane that is away does not
  /// hold every request for the fetch timeout. Default: 2000.
  uint32_t failure_ttl_ms = 2000;
  /// Sandboxes whose grants are kept; beyond it the cache is emptied. Default: 4096.
  std::size_t sandboxes_max = 4096;
  /// Rate-limit buckets kept; beyond it full (idle) buckets are dropped. Default: 65536.
  std::size_t buckets_max = 65536;
};

/// Thread-safe cache of grants per sandbox and token buckets per credential.
class credential_cache {
public:
  using clock = std::chrono::steady_clock;
  using grant_list = std::vector<schema::credential_grant>;

  explicit credential_cache(credential_cache_options options = {}) : options_(options) {}

  /// The sandbox's grants if fetched less than ttl_ms ago.
  std::shared_ptr<const grant_list> find(const std::string& sandbox_id,
                                         clock::time_point now) const;
  /// Remembers freshly fetched grants.
  void store(const std::string& sandbox_id, grant_list grants, clock::time_point now);
  /// Remembers a failed fetch: find() answers an empty list for
  /// failure_ttl_ms, then nothing (fetch again).
  void store_failure(const std::string& sandbox_id, clock::time_point now);
  /// Forgets a sandbox's grants (it left the worker).
  void forget(const std::string& sandbox_id);
  /// Takes one use of `grant` from its credential's bucket; false: rate limited.
  bool try_use(const schema::credential_grant& grant, clock::time_point now);

private:
  struct entry {
    std::shared_ptr<const grant_list> grants;
    clock::time_point expires_at;
  };
  void trim_buckets(clock::time_point now);

  credential_cache_options options_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, entry> grants_;
  std::unordered_map<std::string, token_bucket> buckets_;
};

} // namespace airlock::worker::egress
