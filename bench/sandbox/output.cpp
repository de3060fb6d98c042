// sandbox_bench: output throughput through the guest without actors
// (guest_client) against the same producers into a raw pipe.

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/sandbox/cases.hpp"
#include "guest/client.hpp"
#include "worker/rootfs/overlay_driver.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::sandbox_bench {

namespace {

/// Reads everything `argv` writes to a pipe, in-process, and prints the rate.
void raw_pipe(const char* label, const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return;
  std::vector<char*> args;
  args.reserve(argv.size());
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto start = clock_type::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::vector<char> buffer(1 << 16);
  uint64_t total = 0;
  for (ssize_t n; (n = ::read(fds[0], buffer.data(), buffer.size())) > 0;)
    total += static_cast<uint64_t>(n);
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  double s = ms_since(start) / 1000;
  std::printf("output %-24s %8.1f MiB/s (%llu bytes)\n", label,
              static_cast<double>(total) / (1 << 20) / s, static_cast<unsigned long long>(total));
}

/// What to run through one sandbox's guest, with the label it is reported under.
using labelled_commands = std::vector<std::pair<std::string, std::string>>;

/// Starts one sandbox of `template_name` on `rootfs` and drives its guest with
/// guest_client (no actors): each command's stdout is counted and discarded.
/// The agent is `guest_binary`, run from the host's file as the worker does.
void guest_throughput(host_pieces& host, rootfs_driver& rootfs, const std::string& template_name,
                      const std::string& guest_binary, const labelled_commands& commands,
                      const bench_options& opt) {
  const std::string id = "bench-out-" + template_name;
  (void)host.runtime->destroy(id);
  (void)rootfs.delete_sandbox(id);
  auto root = rootfs.create_sandbox(id, template_name, 0);
  if (!root) {
    std::cerr << "rootfs: " << root.error().message << "\n";
    return;
  }
  // The agent runs from the host's file, as the worker runs it.
  auto guest = worker::open_guest_binary(guest_binary);
  if (!guest) {
    std::cerr << "guest: " << guest.error().message << "\n";
    return;
  }
  int pair[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair);
  sandbox_launch_spec spec;
  spec.id = id;
  spec.rootfs_path = root->string();
  spec.init_argv = {"/sbin/airlock-guest", "--fd", "3"};
  spec.init_fd = (*guest)->get();
  spec.channel_fd = pair[1];
  spec.limits.cpu_millis = opt.cpu_millis;
  auto handle = host.runtime->create(spec);
  ::close(pair[1]);
  if (!handle) {
    std::cerr << "runtime: " << handle.error().message << "\n";
    ::close(pair[0]);
  } else if (guest::guest_client client{unique_fd(pair[0])}; client.handshake(5000)) {
    for (const auto& [label, line] : commands) {
      guest::start_request start;
      start.process.cmd = line;
      start.window_bytes = opt.window_kb * 1024;
      auto begin = clock_type::now();
      auto done = client.run_discarding(start, 600000);
      double s = ms_since(begin) / 1000;
      if (!done) {
        std::cerr << label << ": " << done.error().message << "\n";
        continue;
      }
      std::printf("output %-24s %8.1f MiB/s (%llu bytes)\n", label.c_str(),
                  static_cast<double>(done->stdout_bytes) / (1 << 20) / s,
                  static_cast<unsigned long long>(done->stdout_bytes));
    }
  }
  (void)host.runtime->destroy(id);
  (void)rootfs.delete_sandbox(id);
}

/// The `base` template that tests/rootfs builds (debootstrap, minutes) and
/// caches; the bench only uses it, never builds it.
std::filesystem::path base_cache_dir() {
  const char* override_dir = std::getenv("AIRLOCK_TEST_CACHE");
  std::filesystem::path dir =
    override_dir != nullptr ? override_dir : "/var/tmp/airlock-test-cache";
  return dir / "base";
}

/// The bench's own copy of the `base` template, imported once from the cache
/// (the namespace runtime id-maps the rootfs, which overlayfs mounts refuse
/// here, so the cached overlay template is copied into the bench's btrfs).
status import_base(host_pieces& host) {
  if (host.rootfs->has_template("base"))
    return status::ok();
  auto cache = overlay_driver::open(rootfs_options{.data_dir = base_cache_dir()});
  if (!cache || !(*cache)->has_template("base")) {
    return make_status(errc::not_found, "no cached base template under " + base_cache_dir().string()
                                          + " (build it once with tests/rootfs/rootfs_slow_test)");
  }
  auto from = (*cache)->template_path("base");
  auto staging = host.rootfs->create_template("base");
  if (!from || !staging)
    return make_status(errc::io_error, "cannot stage the base template");
  std::cout << "importing base from " << from->string() << " (once)\n";
  if (spawn_wait({"/bin/cp", "-a", "--reflink=auto", from->string() + "/.", staging->string()})
      != 0) {
    (void)host.rootfs->delete_template("base");
    return make_status(errc::io_error, "cp of the base template failed");
  }
  return host.rootfs->seal_template("base");
}

} // namespace

/// The guest's throughput without actors, against the same producer writing
/// into a pipe that this process reads (the raw pipe), in the same run.
void bench_output_direct(host_pieces& host, const bench_options& opt) {
  const std::string bytes = std::to_string(opt.output_mb << 20);
  const std::string blocks = std::to_string(opt.output_mb * 16);
  // The reference command (GNU coreutils head) needs the `base` template.
  if (auto base = import_base(host); base.is_ok()) {
    guest_throughput(host, *host.rootfs, "base", opt.guest,
                     {{"guest, GNU head (base)", "head -c " + bytes + " /dev/zero"}}, opt);
  } else {
    std::cerr << base.message << "; GNU head in the guest skipped\n";
  }
  raw_pipe("raw pipe, GNU head", {"/usr/bin/head", "-c", bytes, "/dev/zero"});
  guest_throughput(
    host, *host.rootfs, "minimal", opt.guest,
    {{"guest, busybox head", "head -c " + bytes + " /dev/zero"},
     {"guest, busybox dd", "dd if=/dev/zero bs=65536 count=" + blocks + " 2>/dev/null"}},
    opt);
  raw_pipe("raw pipe, busybox head", {"/bin/busybox", "head", "-c", bytes, "/dev/zero"});
  raw_pipe("raw pipe, busybox dd",
           {"/bin/busybox", "dd", "if=/dev/zero", "bs=65536", "count=" + blocks});
}

} // namespace airlock::sandbox_bench
