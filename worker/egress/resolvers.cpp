#include "worker/egress/resolvers.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include <boost/asio/post.hpp>

#include "schema/egress_rules.hpp"
#include "worker/egress/address_filter.hpp"

namespace airlock::worker::egress {
namespace {

/// A name map file larger than this is refused: it is read whole at start.
constexpr std::uintmax_t static_file_bytes_max = 16u << 20;

status bad_line(const std::string& path, size_t line, std::string what) {
  return make_status(errc::invalid_argument,
                     path + ":" + std::to_string(line) + ": " + std::move(what));
}

/// One line "name address [address...]" (comment already cut) into `names`.
status parse_line(const std::string& path, size_t number, std::string_view line,
                  std::map<std::string, std::vector<uint32_t>>& names) {
  std::istringstream words{std::string(line)};
  std::string name;
  if (!(words >> name))
    return status::ok(); // blank
  auto canonical = schema::normalize_host_name(name);
  if (!canonical)
    return bad_line(path, number, "\"" + name + "\" is not a valid host name");
  auto& addresses = names[*canonical];
  size_t before = addresses.size();
  for (std::string word; words >> word;) {
    auto address = parse_ipv4(word);
    if (!address)
      return bad_line(path, number, "\"" + word + "\" is not an IPv4 address");
    addresses.push_back(*address);
  }
  if (addresses.size() == before)
    return bad_line(path, number, "\"" + name + "\" has no address");
  return status::ok();
}

} // namespace

// ---- static_resolver ----

static_resolver::static_resolver(std::map<std::string, std::vector<uint32_t>> names) {
  for (auto& [name, addresses] : names)
    if (auto canonical = schema::normalize_host_name(name))
      names_[*canonical] = std::move(addresses);
}

result<std::unique_ptr<static_resolver>> static_resolver::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_status(errc::io_error, "cannot read the name map " + path);
  in.seekg(0, std::ios::end);
  if (in.tellg() > static_cast<std::streamoff>(static_file_bytes_max))
    return make_status(errc::too_large, "the name map " + path + " is larger than 16 MiB");
  in.seekg(0);
  std::map<std::string, std::vector<uint32_t>> names;
  size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::string_view text = line;
    text = text.substr(0, text.find('#'));
    if (auto parsed = parse_line(path, number, text, names); !parsed)
      return parsed;
  }
  if (in.bad())
    return make_status(errc::io_error, "reading the name map " + path + " failed");
  return std::make_unique<static_resolver>(std::move(names));
}

result<std::vector<uint32_t>> static_resolver::resolve(std::string_view name) {
  auto canonical = schema::normalize_host_name(name);
  auto it = canonical ? names_.find(*canonical) : names_.end();
  if (it == names_.end())
    return make_status(errc::not_found, "no address for " + std::string(name.substr(0, 253)));
  return it->second;
}

// ---- system_resolver ----

result<std::vector<uint32_t>> system_resolver::resolve(std::string_view name) {
  auto canonical = schema::normalize_host_name(name);
  if (!canonical)
    return make_status(errc::invalid_argument, "not a host name; only names are resolved");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM; // one entry per address, not one per socket type
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(canonical->c_str(), nullptr, &hints, &list);
  if (rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_ADDRFAMILY)
    return make_status(errc::not_found, "no IPv4 address for " + *canonical);
  if (rc != 0)
    return make_status(errc::unavailable,
                       "resolving " + *canonical + " failed: " + ::gai_strerror(rc));
  std::vector<uint32_t> addresses;
  for (auto* entry = list; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family != AF_INET || entry->ai_addrlen < sizeof(sockaddr_in))
      continue;
    sockaddr_in in{};
    std::memcpy(&in, entry->ai_addr, sizeof in);
    uint32_t address = ntohl(in.sin_addr.s_addr);
    if (std::find(addresses.begin(), addresses.end(), address) == addresses.end())
      addresses.push_back(address);
  }
  ::freeaddrinfo(list);
  if (addresses.empty())
    return make_status(errc::not_found, "no IPv4 address for " + *canonical);
  return addresses;
}

// ---- resolver_pool ----

resolver_pool::resolver_pool(std::unique_ptr<name_resolver> resolver, resolver_pool_options options,
                             clock_fn clock)
    : resolver_(std::move(resolver)), options_(options), clock_(std::move(clock)) {
  size_t count = std::max<size_t>(options_.threads, 1);
  threads_.reserve(count);
  for (size_t i = 0; i < count; ++i)
    threads_.emplace_back([this] { run(); });
}

resolver_pool::~resolver_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_)
    thread.join();
}

int64_t resolver_pool::now_ms() const {
  if (clock_)
    return clock_();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

void resolver_pool::resolve(std::string name, boost::asio::any_io_executor ex, callback done) {
  std::lock_guard lock(mutex_);
  if (auto hit = cache_.find(name); hit != cache_.end()) {
    if (hit->second.expires_ms > now_ms()) {
      ++stats_.cache_hits;
      boost::asio::post(
        ex, [done = std::move(done), addresses = hit->second.addresses]() { done(addresses); });
      return;
    }
    cache_order_.erase(hit->second.order);
    cache_.erase(hit);
  }
  if (waiters_ >= options_.queue_max) {
    ++stats_.rejected;
    boost::asio::post(ex, [done = std::move(done)]() {
      done(make_status(errc::resource_exhausted, "too many name lookups are waiting"));
    });
    return;
  }
  ++waiters_;
  auto [it, fresh] = waiting_.try_emplace(name);
  it->second.push_back(waiter{std::move(ex), std::move(done)});
  if (!fresh) {
    ++stats_.joined;
    return;
  }
  queue_.push_back(std::move(name));
  wake_.notify_one();
}

void resolver_pool::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_)
      return;
    std::string name = std::move(queue_.front());
    queue_.pop_front();
    ++stats_.lookups;
    lock.unlock();
    auto answer = resolver_->resolve(name);
    lock.lock();
    if (stopping_)
      return;
    if (answer)
      remember(name, *answer);
    auto node = waiting_.extract(name);
    if (node.empty())
      continue;
    waiters_ -= node.mapped().size();
    for (auto& w : node.mapped())
      boost::asio::post(w.ex, [done = std::move(w.done), answer]() { done(answer); });
  }
}

void resolver_pool::remember(const std::string& name, const std::vector<uint32_t>& addresses) {
  if (options_.cache_entries_max == 0)
    return;
  if (auto old = cache_.find(name); old != cache_.end()) {
    cache_order_.erase(old->second.order);
    cache_.erase(old);
  }
  while (cache_.size() >= options_.cache_entries_max) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  cache_order_.push_back(name);
  cache_[name] =
    cache_entry{addresses, now_ms() + options_.cache_ttl_ms, std::prev(cache_order_.end())};
}

resolver_pool_stats resolver_pool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

} // namespace airlock::worker::egress
