// Directory watches of the real airlock-guest binary (a real inotify on a
// temporary directory), driven through guest_client. Waits are for events,
// each bounded.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "guest_harness.hpp"
#include "tests/support/host.hpp"

namespace airlock::guest {
namespace {

using testing::guest_process;
namespace fs = std::filesystem;

constexpr int wait_ms = 10'000;

class agent_watch : public ::testing::Test {
protected:
  void SetUp() override { start_guest({}); }

  void start_guest(std::vector<std::string> args) {
    guest_.reset();
    guest_ = guest_process::spawn(std::move(args));
    ASSERT_NE(guest_, nullptr);
    ASSERT_TRUE(guest_->client().handshake(wait_ms));
  }

  guest_client& client() { return guest_->client(); }

  std::string path(const std::string& rel) const { return dir_.path() + "/" + rel; }

  /// Collects events of `watch` until `done` holds for them; fails the test
  /// when the watch ends or nothing arrives in time.
  std::vector<watch_event>
  collect(uint32_t watch, const std::function<bool(const std::vector<watch_event>&)>& done) {
    std::vector<watch_event> seen;
    while (!done(seen)) {
      auto event = client().next_event(wait_ms);
      if (!event) {
        ADD_FAILURE() << "waiting for watch events: " << event.error().message;
        return seen;
      }
      if (auto* batch = std::get_if<watch_events>(&*event); batch && batch->watch_id == watch)
        seen.insert(seen.end(), batch->events.begin(), batch->events.end());
      if (auto* e = std::get_if<error_reply>(&*event); e && e->watch_id == watch) {
        ADD_FAILURE() << "the watch ended: " << e->message;
        return seen;
      }
    }
    return seen;
  }

  /// The error that ends `watch` (events before it are skipped).
  error_reply ending_of(uint32_t watch) {
    for (;;) {
      auto event = client().next_event(wait_ms);
      if (!event) {
        ADD_FAILURE() << "no end of the watch: " << event.error().message;
        return {};
      }
      if (auto* e = std::get_if<error_reply>(&*event); e && e->watch_id == watch) {
        EXPECT_TRUE(e->ended);
        return *e;
      }
    }
  }

  /// inotify descriptors the agent holds open.
  size_t inotify_fds() const {
    size_t count = 0;
    for (const auto& entry :
         fs::directory_iterator("/proc/" + std::to_string(guest_->pid()) + "/fd")) {
      std::error_code ignored;
      if (fs::read_symlink(entry.path(), ignored).string() == "anon_inode:inotify")
        ++count;
    }
    return count;
  }

  static bool has(const std::vector<watch_event>& events, const std::string& name,
                  watch_kind kind) {
    for (const auto& e : events)
      if (e.name == name && e.kind == kind)
        return true;
    return false;
  }

  airlock::test::temp_dir dir_{"airlock-watch"};
  std::unique_ptr<guest_process> guest_;
};

TEST_F(agent_watch, reports_create_write_chmod_rename_and_remove_as_envd_names_them) {
  auto watch = client().watch(dir_.path(), false, wait_ms);
  ASSERT_TRUE(watch) << watch.error().message;
  airlock::test::write_file(path("a.txt"), "one");
  ASSERT_EQ(::chmod(path("a.txt").c_str(), 0600), 0);
  ASSERT_EQ(::rename(path("a.txt").c_str(), path("b.txt").c_str()), 0);
  ASSERT_EQ(::unlink(path("b.txt").c_str()), 0);
  auto events = collect(*watch, [](const std::vector<watch_event>& seen) {
    return has(seen, "b.txt", watch_kind::remove);
  });
  EXPECT_TRUE(has(events, "a.txt", watch_kind::create));
  EXPECT_TRUE(has(events, "a.txt", watch_kind::write));
  EXPECT_TRUE(has(events, "a.txt", watch_kind::chmod));
  EXPECT_TRUE(has(events, "a.txt", watch_kind::rename)) << "moved from";
  EXPECT_TRUE(has(events, "b.txt", watch_kind::create)) << "moved to (fsnotify's create)";
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front(), (watch_event{"a.txt", watch_kind::create})) << "in the kernel's order";
}

TEST_F(agent_watch, a_plain_watch_does_not_see_inside_subdirectories) {
  fs::create_directory(path("sub"));
  auto watch = client().watch(dir_.path(), false, wait_ms);
  ASSERT_TRUE(watch);
  airlock::test::write_file(path("sub/inner.txt"), "x");
  airlock::test::write_file(path("top.txt"), "x");
  auto events = collect(*watch, [](const std::vector<watch_event>& seen) {
    return has(seen, "top.txt", watch_kind::create);
  });
  for (const auto& e : events)
    EXPECT_EQ(e.name.find("inner"), std::string::npos) << e.name;
}

TEST_F(agent_watch, a_recursive_watch_names_events_below_the_root_and_follows_new_directories) {
  fs::create_directories(path("sub/deeper"));
  auto watch = client().watch(dir_.path(), true, wait_ms);
  ASSERT_TRUE(watch);
  airlock::test::write_file(path("sub/deeper/f.txt"), "x");
  collect(*watch, [](const std::vector<watch_event>& seen) {
    return has(seen, "sub/deeper/f.txt", watch_kind::create);
  });
  fs::create_directory(path("later"));
  // Once the agent reported the new directory, it watches it.
  collect(*watch, [](const std::vector<watch_event>& seen) {
    return has(seen, "later", watch_kind::create);
  });
  airlock::test::write_file(path("later/g.txt"), "x");
  collect(*watch, [](const std::vector<watch_event>& seen) {
    return has(seen, "later/g.txt", watch_kind::create);
  });
  // A directory moved away is no longer watched under its old name.
  ASSERT_EQ(::rename(path("sub").c_str(), (dir_.path() + "-moved").c_str()), 0);
  collect(*watch, [](const std::vector<watch_event>& seen) {
    return has(seen, "sub", watch_kind::rename);
  });
  airlock::test::write_file(dir_.path() + "-moved/deeper/gone.txt", "x");
  airlock::test::write_file(path("marker"), "x");
  auto after = collect(*watch, [](const std::vector<watch_event>& seen) {
    return has(seen, "marker", watch_kind::create);
  });
  for (const auto& e : after)
    EXPECT_EQ(e.name.find("gone"), std::string::npos) << e.name;
  fs::remove_all(dir_.path() + "-moved");
}

TEST_F(agent_watch, refuses_a_missing_path_a_file_and_a_relative_path) {
  EXPECT_EQ(client().watch(path("missing"), false, wait_ms).code(), errc::not_found);
  airlock::test::write_file(path("file"), "x");
  EXPECT_EQ(client().watch(path("file"), false, wait_ms).code(), errc::invalid_argument);
  EXPECT_EQ(client().watch("relative/dir", false, wait_ms).code(), errc::invalid_argument);
  EXPECT_EQ(inotify_fds(), 0u) << "a refused watch keeps no descriptor";
  EXPECT_TRUE(client().ping(wait_ms));
}

TEST_F(agent_watch, ends_when_the_watched_directory_is_removed) {
  fs::create_directory(path("w"));
  auto watch = client().watch(path("w"), true, wait_ms);
  ASSERT_TRUE(watch);
  fs::remove_all(path("w"));
  auto end = ending_of(*watch);
  EXPECT_EQ(end.code, errc::not_found);
  EXPECT_NE(end.message.find("removed"), std::string::npos) << end.message;
  ASSERT_TRUE(client().ping(wait_ms));
  EXPECT_EQ(inotify_fds(), 0u);
}

TEST_F(agent_watch, a_stopped_watch_closes_its_inotify_descriptor) {
  auto a = client().watch(dir_.path(), true, wait_ms);
  auto b = client().watch(dir_.path(), false, wait_ms);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(inotify_fds(), 2u);
  ASSERT_TRUE(client().unwatch(*a).is_ok());
  ASSERT_TRUE(client().ping(wait_ms)); // the guest handles messages in order
  EXPECT_EQ(inotify_fds(), 1u);
  ASSERT_TRUE(client().unwatch(*b).is_ok());
  ASSERT_TRUE(client().unwatch(12345).is_ok()); // unknown: ignored
  ASSERT_TRUE(client().ping(wait_ms));
  EXPECT_EQ(inotify_fds(), 0u);
}

TEST_F(agent_watch, refuses_watches_beyond_its_limit_until_one_stops) {
  start_guest({"--watches-max", "2"});
  auto a = client().watch(dir_.path(), false, wait_ms);
  auto b = client().watch(dir_.path(), false, wait_ms);
  ASSERT_TRUE(a && b);
  auto c = client().watch(dir_.path(), false, wait_ms);
  EXPECT_EQ(c.code(), errc::resource_exhausted);
  ASSERT_TRUE(client().unwatch(*a).is_ok());
  EXPECT_TRUE(client().watch(dir_.path(), false, wait_ms)) << "a slot was freed";
}

TEST_F(agent_watch, a_recursive_watch_is_bounded_in_directories_at_start_and_as_it_grows) {
  start_guest({"--watch-dirs-max", "3"});
  fs::create_directories(path("big/a"));
  fs::create_directories(path("big/b"));
  fs::create_directories(path("big/c"));
  EXPECT_EQ(client().watch(path("big"), true, wait_ms).code(), errc::resource_exhausted)
    << "4 directories";
  EXPECT_TRUE(client().watch(path("big"), false, wait_ms)) << "a plain watch is one directory";
  fs::remove_all(path("big/c"));
  auto watch = client().watch(path("big"), true, wait_ms);
  ASSERT_TRUE(watch) << watch.error().message;
  fs::create_directory(path("big/d"));
  auto end = ending_of(*watch);
  EXPECT_EQ(end.code, errc::resource_exhausted);
  EXPECT_NE(end.message.find("3 directories"), std::string::npos) << end.message;
}

TEST_F(agent_watch, a_watch_whose_kernel_queue_overflows_ends_with_a_clear_error) {
  // The agent stops reading inotify while 64 KiB wait for the host, which
  // does not read here: the kernel's queue overflows.
  start_guest({"--outbound-pause-bytes", "65536"});
  auto watch = client().watch(dir_.path(), false, wait_ms);
  ASSERT_TRUE(watch);
  const auto queued_max =
    std::stoul(airlock::test::read_file("/proc/sys/fs/inotify/max_queued_events"));
  int a = ::open(path("a").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  int b = ::open(path("b").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  // Alternating files: the kernel merges only identical consecutive events.
  for (size_t i = 0; i < 4 * queued_max + 200'000; ++i)
    ASSERT_EQ(::write(i % 2 == 0 ? a : b, "x", 1), 1);
  ::close(a);
  ::close(b);
  auto end = ending_of(*watch);
  EXPECT_EQ(end.code, errc::resource_exhausted);
  EXPECT_NE(end.message.find("queue"), std::string::npos) << end.message;
  ASSERT_TRUE(client().ping(wait_ms));
  EXPECT_EQ(inotify_fds(), 0u);
}

} // namespace
} // namespace airlock::guest
