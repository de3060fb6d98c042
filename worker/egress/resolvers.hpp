#pragma once
// Name resolution for the egress proxy. The egress proxy resolves every name
// itself and connects only to addresses it resolved, so a guest's DNS answer
// or /etc/hosts entry never chooses a destination. static_resolver serves a
// fixed map (tests, air-gapped hosts); system_resolver asks the host's
// resolver; resolver_pool runs either off the network threads with a cache.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "worker/egress/egress_types.hpp"

namespace airlock::worker::egress {

/// A fixed name → IPv4 addresses map. Names are matched in canonical form
/// (lowercase, no trailing dot). Thread-safe (immutable).
class static_resolver : public name_resolver {
public:
  /// Names that are not valid host names are dropped.
  explicit static_resolver(std::map<std::string, std::vector<uint32_t>> names);

  /// Reads lines "name address [address...]"; '#' starts a comment; blank
  /// lines are skipped; a name listed twice gets the addresses of both lines.
  /// errc::io_error when the file cannot be read, errc::invalid_argument
  /// (with the line number) for a bad name or address.
  static result<std::unique_ptr<static_resolver>> from_file(const std::string& path);

  /// errc::not_found for a name that is not in the map.
  result<std::vector<uint32_t>> resolve(std::string_view name) override;

private:
  std::map<std::string, std::vector<uint32_t>, std::less<>> names_;
};

/// The host's resolver through getaddrinfo, IPv4 only. Blocks.
class system_resolver : public name_resolver {
public:
  /// errc::invalid_argument for a name that is not a valid host name (IP
  /// literals included: those never go through the resolver),
  /// errc::not_found when the name has no IPv4 address, errc::unavailable
  /// when the resolver failed (try again later).
  result<std::vector<uint32_t>> resolve(std::string_view name) override;
};

struct resolver_pool_options {
  /// Threads that call the resolver. Default: 2
  size_t threads = 2;
  /// Lookups waiting for a thread, beyond which resolve() answers
  /// errc::resource_exhausted. Default: 1024
  size_t queue_max = 1024;
  /// How long a successful answer is served from the cache. Default: 30000
  int64_t cache_ttl_ms = 30000;
  /// Cached names; the oldest entry goes first when full. Default: 4096
  size_t cache_entries_max = 4096;
};

struct resolver_pool_stats {
  uint64_t cache_hits = 0; ///< answered from the cache
  uint64_t lookups = 0;    ///< calls into the resolver
  uint64_t joined = 0;     ///< waited for a lookup of the same name already under way
  uint64_t rejected = 0;   ///< refused because the queue was full
};

/// Runs a name_resolver on a fixed set of threads and hands answers back to
/// the caller's executor. Concurrent requests for one name share one lookup.
/// Thread-safe.
class resolver_pool {
public:
  /// Milliseconds on a monotonic clock; injectable so tests can age the cache.
  using clock_fn = std::function<int64_t()>;

  explicit resolver_pool(std::unique_ptr<name_resolver> resolver,
                         resolver_pool_options options = {}, clock_fn clock = {});
  /// Joins the threads. Answers not yet posted are dropped (their `done` never
  /// runs), so no callback reaches an executor after the pool is gone.
  ~resolver_pool();
  resolver_pool(const resolver_pool&) = delete;
  resolver_pool& operator=(const resolver_pool&) = delete;

  /// Resolves `name` and posts done(answer) to `ex`, never inline. `name`
  /// should be canonical (the cache is keyed by the text as given).
  /// errc::resource_exhausted when queue_max lookups already wait.
  void resolve(std::string name, boost::asio::any_io_executor ex,
               std::function<void(result<std::vector<uint32_t>>)> done);

  resolver_pool_stats stats() const;

private:
  using callback = std::function<void(result<std::vector<uint32_t>>)>;
  struct waiter {
    boost::asio::any_io_executor ex;
    callback done;
  };
  struct cache_entry {
    std::vector<uint32_t> addresses;
    int64_t expires_ms = 0;
    std::list<std::string>::iterator order;
  };

  void run();
  void remember(const std::string& name, const std::vector<uint32_t>& addresses);
  int64_t now_ms() const;

  std::unique_ptr<name_resolver> resolver_;
  resolver_pool_options options_;
  clock_fn clock_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<std::string> queue_;                                ///< names waiting for a thread
  std::unordered_map<std::string, std::vector<waiter>> waiting_; ///< by name, queued or running
  size_t waiters_ = 0;
  std::unordered_map<std::string, cache_entry> cache_;
  std::list<std::string> cache_order_; ///< oldest first
  resolver_pool_stats stats_;
  std::vector<std::thread> threads_;
};

} // namespace airlock::worker::egress
