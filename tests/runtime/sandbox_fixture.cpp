#include "sandbox_fixture.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/support/environment.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker::testing {
namespace fs = std::filesystem;

namespace {

bool user_namespaces_work() {
  pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(::unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
  int wstatus = 0;
  return pid > 0 && ::waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus)
         && WEXITSTATUS(wstatus) == 0;
}

} // namespace

std::string integration_skip_reason() {
  if (auto missing = airlock::test::root_missing(
        "the namespace runtime writes uid maps, cgroups, veths and nftables"))
    return *missing;
  if (!user_namespaces_work())
    return "unshare(CLONE_NEWUSER) fails here: user namespaces are unavailable";
  for (const char* tool : {"/bin/busybox", "/sbin/ip", "/usr/sbin/nft"})
    if (::access(tool, X_OK) != 0)
      return std::string(tool) + " is missing (busybox-static, iproute2, nftables)";
  if (auto driver = detect_cgroup_driver({}); !driver)
    return "no usable cgroups: " + driver.error().message;
  return {};
}

busybox_rootfs::busybox_rootfs() : dir_("airlock-rootfs") {
  const fs::path root = dir_.path();
  for (const char* sub : {"bin", "proc", "sys", "dev", "etc", "root", "mnt", "tmp"})
    fs::create_directories(root / sub);
  fs::permissions(root / "tmp", fs::perms::all | fs::perms::sticky_bit);
  fs::copy_file("/bin/busybox", root / "bin" / "busybox");
  fs::permissions(root / "bin" / "busybox", fs::perms(0755));
  for (const char* applet :
       {"sh",      "cat",    "ls",      "id",    "mount", "umount",   "hostname", "ping",
        "wget",    "nc",     "kill",    "ps",    "sleep", "usleep",   "echo",     "grep",
        "head",    "insmod", "mknod",   "dd",    "seq",   "true",     "false",    "test",
        "tr",      "mkdir",  "rm",      "touch", "find",  "readlink", "wc",       "ip",
        "unshare", "chroot", "nsenter", "stat",  "sed",   "cut",      "awk",      "env"})
    fs::create_symlink("busybox", root / "bin" / applet);
  std::ofstream(root / "etc" / "passwd") << "root:x:0:0:root:/root:/bin/sh\n";
  std::ofstream(root / "etc" / "group") << "root:x:0:\n";
}

std::vector<std::string> command_loop_argv() {
  return {"/bin/sh", "-c",
          "exec </dev/null\n"
          "while IFS= read -r line <&3; do\n"
          "  ( eval \"$line\" ) >&3 2>&1\n"
          "  printf '\\001rc=%d\\n' $? >&3\n"
          "done\n"};
}

command_result shell_session::run(const std::string& command, int timeout_ms) {
  command_result out;
  std::string line = command + "\n";
  if (::write(socket_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    ADD_FAILURE() << "cannot send command: " << std::strerror(errno);
    return out;
  }
  std::string buffer;
  uint64_t deadline = monotonic_ms() + static_cast<uint64_t>(timeout_ms);
  for (;;) {
    // The marker's first byte is \x01, which the script itself spells as
    // text, so printing the init's cmdline cannot fake a status.
    auto marker = buffer.find("\x01rc=");
    if (marker != std::string::npos && buffer.find('\n', marker) != std::string::npos) {
      out.output = buffer.substr(0, marker);
      out.exit_code = std::atoi(buffer.c_str() + marker + 4);
      return out;
    }
    uint64_t now = monotonic_ms();
    pollfd pfd{socket_.get(), POLLIN, 0};
    int ready = now >= deadline ? 0 : ::poll(&pfd, 1, static_cast<int>(deadline - now));
    if (ready <= 0) {
      ADD_FAILURE() << "no status for `" << command << "` within " << timeout_ms
                    << " ms; output so far: " << buffer;
      return out;
    }
    char chunk[4096];
    ssize_t n = ::read(socket_.get(), chunk, sizeof chunk);
    if (n <= 0) {
      ADD_FAILURE() << "sandbox channel closed while running `" << command << "`: " << buffer;
      return out;
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

namespace_runtime_options test_options(const std::string& state_dir) {
  namespace_runtime_options options;
  options.state_dir = state_dir;
  options.cgroups.parent = "airlock-test";
  options.net.nft_table = "airlock_test";
  options.net.interface_prefix = "at";
  options.address_pool = "10.200.128.0/17";
  options.id_range_base = 200000000;
  options.slots_max = 64;
  return options;
}

sandbox_under_test::~sandbox_under_test() {
  if (runtime != nullptr) {
    auto destroyed = runtime->destroy(handle.id);
    EXPECT_TRUE(destroyed) << destroyed.message;
  }
}

void runtime_test::SetUp() {
  if (auto reason = integration_skip_reason(); !reason.empty())
    GTEST_SKIP() << reason;
  // One runtime test process at a time on this host: they share the test
  // address pool and uid range.
  lock_.reset(::open("/run/airlock-runtime-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(lock_.valid());
  ASSERT_EQ(::flock(lock_.get(), LOCK_EX), 0);
  state_ = std::make_unique<temp_dir>("airlock-state");
  auto opened = namespace_runtime::open(test_options(state_->path()));
  ASSERT_TRUE(opened) << opened.error().message;
  runtime_ = std::move(*opened);
}

void runtime_test::TearDown() {
  runtime_.reset();
  state_.reset();
  if (!lock_.valid())
    return;
  // Still holding the lock: no other test process uses the test table or
  // the test cgroup parent now, so both can go (best effort).
  (void)run_command({"/usr/sbin/nft", "delete", "table", "inet", "airlock_test"});
  if (auto mounts = read_file("/proc/self/mountinfo", 16 << 20)) {
    auto cgroups = parse_cgroup_mounts(*mounts);
    for (const auto& [controller, root] : cgroups.v1_paths)
      ::rmdir((root + "/airlock-test").c_str());
  }
  ::rmdir("/sys/fs/cgroup/airlock-test");
}

std::string runtime_test::unique_id(const std::string& name) const {
  return name + "-" + std::to_string(::getpid());
}

sandbox_under_test runtime_test::start_sandbox(const std::string& id, sandbox_limits limits) {
  auto rootfs = std::make_unique<busybox_rootfs>();
  std::string path = rootfs->path();
  sandbox_under_test box = start_on(id, path, limits);
  box.rootfs = std::move(rootfs);
  return box;
}

sandbox_under_test runtime_test::start_sandbox_on(const std::string& id,
                                                  const std::string& rootfs_path) {
  return start_on(id, rootfs_path, {});
}

sandbox_under_test runtime_test::start_on(const std::string& id, const std::string& rootfs_path,
                                          sandbox_limits limits) {
  sandbox_under_test box;
  int pair[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  unique_fd ours(pair[0]);
  unique_fd theirs(pair[1]);
  sandbox_launch_spec spec;
  spec.id = id;
  spec.rootfs_path = rootfs_path;
  spec.init_argv = command_loop_argv();
  spec.channel_fd = theirs.get();
  spec.stderr_fd = 2;
  spec.limits = limits;
  auto created = runtime_->create(spec);
  EXPECT_TRUE(created) << (created ? "" : created.error().message);
  if (!created)
    return box;
  box.handle = *created;
  box.shell = shell_session(std::move(ours));
  box.runtime = runtime_.get();
  return box;
}

bool mountinfo_mentions(const std::string& text) {
  auto info = read_file("/proc/self/mountinfo", 16 << 20);
  return info && info->find(text) != std::string::npos;
}

int host_run(const std::vector<std::string>& argv, uint32_t timeout_ms) {
  command_options options;
  options.timeout_ms = timeout_ms;
  auto out = run_command(argv, options);
  return out ? out->exit_code : -1;
}

} // namespace airlock::worker::testing
