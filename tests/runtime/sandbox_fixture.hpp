#pragma once
// Shared pieces of the runtime's integration tests: a skip reason, a
// throw-away busybox rootfs, a runtime on a temporary state directory with
// the test address pool, and a shell session over the sandbox's channel
// (fd 3) that runs one command at a time and returns its output and status.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "schema/unique_fd.hpp"
#include "tests/support/host.hpp"
#include "worker/runtime/namespace_runtime.hpp"

namespace airlock::worker::testing {

/// Why these tests cannot run here ("" when they can).
std::string integration_skip_reason();

using airlock::test::temp_dir;

/// A rootfs holding a statically linked busybox and its applet links.
class busybox_rootfs {
public:
  busybox_rootfs();
  const std::string& path() const { return dir_.path(); }

private:
  temp_dir dir_;
};

/// The loop the sandbox's init runs: read a line from fd 3, run it in a
/// subshell with output to fd 3, then write "\x01rc=<status>\n".
std::vector<std::string> command_loop_argv();

/// Output and exit status of one command.
struct command_result {
  int exit_code = -1;
  std::string output;
};

/// The test's end of a sandbox's channel.
class shell_session {
public:
  shell_session() = default;
  explicit shell_session(unique_fd socket) : socket_(std::move(socket)) {}

  /// Runs `command` in the sandbox; fails the test when no status arrives
  /// within `timeout_ms`.
  command_result run(const std::string& command, int timeout_ms = 15000);

private:
  unique_fd socket_;
};

/// Options of a runtime confined to the test pool (10.200.128.0/17), test
/// cgroup parent, test nftables table and a high uid range.
namespace_runtime_options test_options(const std::string& state_dir);

/// One sandbox created by a runtime; destroyed (and checked) on destruction.
struct sandbox_under_test {
  sandbox_handle handle;
  shell_session shell;
  std::unique_ptr<busybox_rootfs> rootfs;
  namespace_runtime* runtime = nullptr;

  sandbox_under_test() = default;
  sandbox_under_test(sandbox_under_test&&) = default;
  sandbox_under_test& operator=(sandbox_under_test&&) = default;
  ~sandbox_under_test();
};

/// Base fixture: skips without the prerequisites, holds a host-wide lock so
/// that test processes never share addresses, opens a runtime.
class runtime_test : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;

  /// Creates a sandbox running the command loop. ASSERTs success.
  sandbox_under_test start_sandbox(const std::string& id, sandbox_limits limits = {});

  /// Like start_sandbox, on a rootfs the caller owns (it must outlive the
  /// sandbox and hold /bin/sh).
  sandbox_under_test start_sandbox_on(const std::string& id, const std::string& rootfs_path);

  /// A sandbox id unique to this test process.
  std::string unique_id(const std::string& name) const;

  /// start_sandbox and start_sandbox_on share this.
  sandbox_under_test start_on(const std::string& id, const std::string& rootfs_path,
                              sandbox_limits limits);

  std::unique_ptr<temp_dir> state_;
  std::unique_ptr<namespace_runtime> runtime_;
  unique_fd lock_;
};

/// True when some line of /proc/self/mountinfo contains `text`.
bool mountinfo_mentions(const std::string& text);

/// Runs a tool on the host to its end within `timeout_ms`; its exit code,
/// -1 when it could not run or did not end in time.
int host_run(const std::vector<std::string>& argv, uint32_t timeout_ms = 60'000);

} // namespace airlock::worker::testing
