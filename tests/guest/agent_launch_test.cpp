// The real airlock-guest binary started the two other ways it runs: as PID 1
// of its own pid namespace (reaping orphans, stopping on SIGTERM) and
// listening on a Unix socket for its first connection. No sleeps: every wait
// is an event with a bounded timeout.

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "guest_harness.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/host.hpp"

namespace airlock::guest {
namespace {

using testing::guest_process;

constexpr int wait_ms = 10'000;

TEST(agent_pid1, as_pid_1_it_reaps_orphans_and_stops_on_sigterm) {
  auto guest = guest_process::spawn({}, {}, true);
  if (guest == nullptr)
    GTEST_SKIP() << "cannot create a pid namespace here";
  auto& client = guest->client();
  auto greeting = client.handshake(wait_ms);
  ASSERT_TRUE(greeting) << greeting.error().message;
  EXPECT_EQ(greeting->pid, 1);
  start_request orphan_maker;
  orphan_maker.process.cmd = "sleep 0.1 >/dev/null 2>&1 & exit 0";
  orphan_maker.process.env = {{"PATH", "/usr/bin:/bin"}};
  auto ran = client.run(orphan_maker, "", wait_ms);
  ASSERT_TRUE(ran) << ran.error().message;
  bool reaped = false;
  for (int attempt = 0; attempt < 200 && !reaped; ++attempt) {
    auto stats = client.stats(wait_ms);
    ASSERT_TRUE(stats);
    reaped = stats->orphans_reaped >= 1;
    if (!reaped) {
      EXPECT_EQ(client.next_event(50).code(), errc::timeout);
    }
  }
  EXPECT_TRUE(reaped) << "PID 1 left a zombie";
  start_request sleeper;
  sleeper.process.argv = {"sleep", "100"};
  auto id = client.start(sleeper);
  ASSERT_TRUE(id);
  auto first = client.next_event(wait_ms);
  ASSERT_TRUE(first && std::holds_alternative<started>(*first));
  // From the parent namespace, as the worker would stop a sandbox.
  ASSERT_EQ(::kill(guest->pid(), SIGTERM), 0);
  std::optional<exited> done;
  while (!done) {
    auto event = client.next_event(wait_ms);
    ASSERT_TRUE(event) << event.error().message;
    if (auto* e = std::get_if<exited>(&*event))
      done = *e;
  }
  EXPECT_EQ(done->signal, SIGTERM);
  auto status = guest->wait_exit(wait_ms);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

/// Waits (bounded) until `name` appears in `dir`, watching with inotify.
bool wait_for_entry(const std::string& dir, const std::string& name, int timeout_ms) {
  int watch = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  unique_fd owner(watch);
  if (watch < 0 || ::inotify_add_watch(watch, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0)
    return false;
  auto path = dir + "/" + name;
  struct stat st {};
  for (int round = 0; round < 100 && ::stat(path.c_str(), &st) != 0; ++round) {
    pollfd p{watch, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0)
      return false;
    char events[4096];
    while (::read(watch, events, sizeof events) > 0) {
    }
  }
  return ::stat(path.c_str(), &st) == 0;
}

TEST(agent_listen, serves_the_first_connection_on_a_unix_socket) {
  airlock::test::temp_dir scratch("airlock-guest");
  auto dir = scratch.path();
  ASSERT_FALSE(dir.empty());
  auto path = dir + "/guest.sock";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(AIRLOCK_GUEST_BINARY, AIRLOCK_GUEST_BINARY, "--listen", path.c_str(), nullptr);
    ::_exit(127);
  }
  ASSERT_TRUE(wait_for_entry(dir, "guest.sock", wait_ms));
  unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
    << std::strerror(errno);
  {
    guest_client client(std::move(fd));
    ASSERT_TRUE(client.handshake(wait_ms));
    start_request echo;
    echo.process.argv = {"echo", "over a socket"};
    auto ran = client.run(echo, "", wait_ms);
    ASSERT_TRUE(ran);
    EXPECT_EQ(ran->out, "over a socket\n");
  }
  int status = 0;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  pollfd p{pidfd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, wait_ms), 1) << "the guest did not exit after the host left";
  ::close(pidfd);
  ::kill(pid, SIGKILL);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace airlock::guest
