#include "worker/egress/resolvers.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "tests/support/wait.hpp"
#include "worker/egress/address_filter.hpp"

namespace airlock::worker::egress {
namespace {

uint32_t addr(std::string_view text) { return parse_ipv4(text).value(); }

/// A temporary file removed at the end of the test.
struct temp_file {
  std::filesystem::path path;
  explicit temp_file(std::string_view text) {
    path = std::filesystem::temp_directory_path()
           / ("airlock-names-" + std::to_string(::getpid()) + "-"
              + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::ofstream(path) << text;
  }
  ~temp_file() { std::filesystem::remove(path); }
};

TEST(static_resolver, reads_a_name_map_file_with_comments) {
  temp_file file("# test internet\n"
                 "api.example.com 203.0.113.10 203.0.113.11  # two\n"
                 "\n"
                 "   Files.Example.  203.0.113.12\n"
                 "api.example.com 203.0.113.13\n");
  auto resolver = static_resolver::from_file(file.path.string());
  ASSERT_TRUE(resolver) << resolver.error().message;
  auto api = (*resolver)->resolve("API.example.com.");
  ASSERT_TRUE(api);
  EXPECT_EQ(*api, (std::vector<uint32_t>{addr("203.0.113.10"), addr("203.0.113.11"),
                                         addr("203.0.113.13")}));
  EXPECT_EQ(*(*resolver)->resolve("files.example"), std::vector<uint32_t>{addr("203.0.113.12")});
  EXPECT_EQ((*resolver)->resolve("missing.example").code(), errc::not_found);
  EXPECT_EQ((*resolver)->resolve("203.0.113.10").code(), errc::not_found);
}

TEST(static_resolver, refuses_bad_lines_with_their_number) {
  for (std::string_view text : {"ok.example 1.2.3.4\nbad 1.2.3\n", "1.2.3.4 5.6.7.8\n",
                                "ok.example 1.2.3.4\nnoaddress.example\n"}) {
    temp_file file(text);
    auto resolver = static_resolver::from_file(file.path.string());
    ASSERT_FALSE(resolver) << text;
    EXPECT_EQ(resolver.code(), errc::invalid_argument);
    EXPECT_NE(resolver.error().message.find(":"), std::string::npos);
  }
  temp_file bad_second("ok.example 1.2.3.4\nbad 1.2.3\n");
  auto resolver = static_resolver::from_file(bad_second.path.string());
  EXPECT_NE(resolver.error().message.find(":2:"), std::string::npos) << resolver.error().message;
  EXPECT_EQ(static_resolver::from_file("/nonexistent/airlock/names").code(), errc::io_error);
}

TEST(system_resolver, refuses_ip_literals_and_invalid_names) {
  system_resolver resolver;
  EXPECT_EQ(resolver.resolve("127.0.0.1").code(), errc::invalid_argument);
  EXPECT_EQ(resolver.resolve("bad_name").code(), errc::invalid_argument);
  auto local = resolver.resolve("localhost");
  if (local) { // /etc/hosts normally has it; a bare container might not
    EXPECT_NE(std::find(local->begin(), local->end(), addr("127.0.0.1")), local->end());
  }
}

/// A resolver that counts calls and can hold them until released.
class gated_resolver : public name_resolver {
public:
  std::atomic<int> calls{0};
  std::atomic<int> inside{0};
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  bool gated = false;

  result<std::vector<uint32_t>> resolve(std::string_view name) override {
    ++calls;
    ++inside;
    if (gated)
      gate.wait();
    --inside;
    if (name == "missing.example")
      return make_status(errc::not_found, "no");
    return std::vector<uint32_t>{static_cast<uint32_t>(name.size())};
  }
};

/// An io_context run by one thread for the test's lifetime.
struct io_thread {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  ~io_thread() {
    work.reset();
    io.stop();
    thread.join();
  }
};

result<std::vector<uint32_t>> resolve_sync(resolver_pool& pool, std::string name,
                                           boost::asio::any_io_executor ex) {
  std::promise<result<std::vector<uint32_t>>> answer;
  pool.resolve(std::move(name), ex,
               [&answer](result<std::vector<uint32_t>> r) { answer.set_value(std::move(r)); });
  return answer.get_future().get();
}

TEST(resolver_pool, caches_answers_until_their_ttl_passes) {
  io_thread io;
  auto resolver = std::make_unique<gated_resolver>();
  auto* counted = resolver.get();
  std::atomic<int64_t> now{1000};
  resolver_pool pool(std::move(resolver), {.threads = 2, .cache_ttl_ms = 30000},
                     [&now] { return now.load(); });
  auto first = resolve_sync(pool, "a.example", io.io.get_executor());
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, std::vector<uint32_t>{9});
  EXPECT_TRUE(resolve_sync(pool, "a.example", io.io.get_executor()));
  EXPECT_EQ(counted->calls.load(), 1);
  EXPECT_EQ(pool.stats().cache_hits, 1u);
  now += 30000;
  EXPECT_TRUE(resolve_sync(pool, "a.example", io.io.get_executor()));
  EXPECT_EQ(counted->calls.load(), 2);
  // Failures are not cached.
  EXPECT_EQ(resolve_sync(pool, "missing.example", io.io.get_executor()).code(), errc::not_found);
  EXPECT_EQ(resolve_sync(pool, "missing.example", io.io.get_executor()).code(), errc::not_found);
  EXPECT_EQ(counted->calls.load(), 4);
}

TEST(resolver_pool, evicts_the_oldest_entry_when_the_cache_is_full) {
  io_thread io;
  auto resolver = std::make_unique<gated_resolver>();
  auto* counted = resolver.get();
  resolver_pool pool(std::move(resolver), {.threads = 1, .cache_entries_max = 2});
  for (std::string name : {"a.example", "bb.example", "ccc.example"})
    ASSERT_TRUE(resolve_sync(pool, name, io.io.get_executor()));
  EXPECT_EQ(counted->calls.load(), 3);
  ASSERT_TRUE(resolve_sync(pool, "ccc.example", io.io.get_executor()));
  ASSERT_TRUE(resolve_sync(pool, "bb.example", io.io.get_executor()));
  EXPECT_EQ(counted->calls.load(), 3);
  ASSERT_TRUE(resolve_sync(pool, "a.example", io.io.get_executor()));
  EXPECT_EQ(counted->calls.load(), 4);
}

TEST(resolver_pool, refuses_lookups_past_the_queue_limit_and_joins_duplicates) {
  io_thread io;
  auto resolver = std::make_unique<gated_resolver>();
  auto* gated = resolver.get();
  gated->gated = true;
  resolver_pool pool(std::move(resolver), {.threads = 1, .queue_max = 3});
  std::atomic<int> ok{0};
  std::atomic<int> exhausted{0};
  auto count = [&ok, &exhausted](result<std::vector<uint32_t>> r) {
    if (r)
      ++ok;
    else if (r.code() == errc::resource_exhausted)
      ++exhausted;
  };
  pool.resolve("a.example", io.io.get_executor(), count);
  pool.resolve("b.example", io.io.get_executor(), count);
  pool.resolve("a.example", io.io.get_executor(), count); // joins the first
  pool.resolve("c.example", io.io.get_executor(), count); // fourth waiter: refused
  airlock::test::wait_for([&] { return exhausted.load() != 0; }, std::chrono::seconds(5));
  EXPECT_EQ(exhausted.load(), 1);
  EXPECT_EQ(ok.load(), 0);
  gated->release.set_value();
  airlock::test::wait_for([&] { return ok.load() >= 3; }, std::chrono::seconds(5));
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(gated->calls.load(), 2); // a.example looked up once for two callers
  auto stats = pool.stats();
  EXPECT_EQ(stats.joined, 1u);
  EXPECT_EQ(stats.rejected, 1u);
  // With the queue drained, lookups are accepted again.
  EXPECT_TRUE(resolve_sync(pool, "d.example", io.io.get_executor()));
}

} // namespace
} // namespace airlock::worker::egress
