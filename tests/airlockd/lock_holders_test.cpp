// The data directory's lock names the process that really holds it: a lock
// taken by a daemon that died is still held by a process the daemon started,
// and /proc/locks names only the dead one.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "airlockd/daemon.hpp"
#include "airlockd/lock_holders.hpp"
#include "tests/support/host.hpp"
#include "tests/support/wait.hpp"

namespace airlock::airlockd {
namespace {

/// A process that took the flock on `path` and exited, leaving it to a child
/// of its that holds the descriptor: fills in both pids.
void lock_and_hand_over(const std::string& path, pid_t& taker, pid_t& holder) {
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  taker = ::fork();
  ASSERT_GE(taker, 0);
  if (taker == 0) {
    // Async-signal-safe calls only: the test process has threads.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0)
      ::_exit(1);
    pid_t inheritor = ::fork();
    if (inheritor == 0) {
      pid_t self = ::getpid();
      (void)!::write(ready[1], &self, sizeof self);
      for (;;)
        ::pause();
    }
    ::_exit(inheritor > 0 ? 0 : 1);
  }
  ::close(ready[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(taker, &status, 0), taker);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(::read(ready[0], &holder, sizeof holder), static_cast<ssize_t>(sizeof holder));
  ::close(ready[0]);
}

TEST(lock_holders, a_busy_lock_names_the_live_holder_and_says_what_to_do) {
  test::temp_dir dir("airlock-lock");
  const std::string path = dir.path() + "/state.lock";
  pid_t taker = 0;
  pid_t holder = 0;
  lock_and_hand_over(path, taker, holder);
  ASSERT_GT(holder, 0);

  EXPECT_EQ(recorded_lock_owner(path), taker) << "/proc/locks names the process that took it";
  auto holders = open_file_holders(path);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].pid, holder);
  EXPECT_EQ(holders[0].command, std::string(::program_invocation_short_name).substr(0, 15));

  auto locked = file_lock::acquire(path);
  ASSERT_FALSE(locked);
  EXPECT_EQ(locked.code(), errc::unavailable);
  const std::string message = locked.error().message;
  EXPECT_NE(message.find("held by pid " + std::to_string(holder)), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(taker) + ", which took the lock, has exited"),
            std::string::npos)
    << message;
  EXPECT_NE(message.find("kill " + std::to_string(holder)), std::string::npos) << message;

  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  EXPECT_TRUE(test::wait_for([&] { return static_cast<bool>(file_lock::acquire(path)); }))
    << "the lock stayed held after its holder was killed";
}

TEST(lock_holders, a_free_file_has_no_owner_and_no_holder) {
  test::temp_dir dir("airlock-lock");
  const std::string path = dir.path() + "/state.lock";
  EXPECT_FALSE(recorded_lock_owner(path)) << "no file";
  auto locked = file_lock::acquire(path);
  ASSERT_TRUE(locked) << locked.error().message;
  EXPECT_EQ(recorded_lock_owner(path), ::getpid());
  EXPECT_TRUE(open_file_holders(path).empty()) << "this process is not listed";
}

} // namespace
} // namespace airlock::airlockd
