// start_parker: a stand-in for a worker that is killed part-way through a
// sandbox's start. It holds what a daemon holds (an flock on a lock file, a
// listening TCP socket without close-on-exec, the runtime's state), starts one
// sandbox on the test runtime, and parks forever when the start reaches the
// named step ("started": after the create returned). The test kills it with
// SIGKILL there and checks what is left.
//
//   start_parker STATE_DIR LOCK_FILE ROOTFS SANDBOX_ID STEP
//
// Prints "listening PORT" once it listens and "parked STEP" once parked, each
// on its own line; "failed: ..." and exit 1 when the start fails first.

#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "tests/runtime/sandbox_fixture.hpp"

namespace {

using namespace airlock::worker;

[[noreturn]] void park(const std::string& step) {
  std::printf("parked %s\n", step.c_str());
  std::fflush(stdout);
  for (;;)
    ::pause();
}

int fail(const std::string& why) {
  std::printf("failed: %s\n", why.c_str());
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 6)
    return fail("usage: start_parker STATE_DIR LOCK_FILE ROOTFS SANDBOX_ID STEP");
  const std::string state_dir = argv[1], lock_file = argv[2], rootfs = argv[3], id = argv[4],
                    step = argv[5];
  const int lock = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0)
    return fail("lock " + lock_file + ": " + std::strerror(errno));
  // No SOCK_CLOEXEC: the worst a daemon's library could do.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0
      || ::listen(listener, 16) != 0
      || ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return fail(std::string("listen: ") + std::strerror(errno));
  std::printf("listening %u\n", static_cast<unsigned>(ntohs(address.sin_port)));
  std::fflush(stdout);

  auto options = airlock::worker::testing::test_options(state_dir);
  options.on_start_step = [&step](std::string_view reached) {
    if (reached == step)
      park(step);
  };
  auto runtime = namespace_runtime::open(options);
  if (!runtime)
    return fail(runtime.error().message);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return fail(std::string("socketpair: ") + std::strerror(errno));
  sandbox_launch_spec spec;
  spec.id = id;
  spec.rootfs_path = rootfs;
  // An init that needs nothing of the parker: one that outlives it shows the
  // death signal was cleared before its exec.
  spec.init_argv = {"/bin/sleep", "1000000"};
  spec.channel_fd = pair[1];
  spec.stderr_fd = 2;
  auto created = (*runtime)->create(spec);
  if (!created)
    return fail(created.error().message);
  park("started");
}
