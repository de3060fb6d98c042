// Sandboxes on this host, side by side with the nearest host-only baseline:
//   create   cold create to guest-ready through the worker actor (btrfs
//            snapshot of `minimal` + namespace runtime + guest hello)
//            vs `bwrap --unshare-all --ro-bind / / true` (fork/exec/wait)
//   exec     round trip of `true` through the sandbox actor and the guest
//            (exec reply + read until exited) vs fork+exec+wait of /bin/true
//   output   `head -c SIZE /dev/zero` through the guest (guest_client, output
//            counted and discarded) vs the same command into a pipe read
//            in-process: GNU head in the cached `base` template (see
//            base_cache_dir) against the host's GNU head, and busybox head/dd
//            in `minimal` against busybox; plus busybox dd into the sandbox
//            actor's ring
//   memory   host memory per idle sandbox (PSS of its processes + its memory
//            cgroup) and MemAvailable before/after N idle sandboxes
//
//   sandbox_bench [--data-dir DIR] [--guest PATH] [--creates N] [--execs N]
//                 [--output-mb N] [--idle N] [--cases create,exec,output,memory]
//                 [--idle-settle-ms N] [--idle-hold-s N] [--cpu-millis N]
//                 [--window-kb N] [--help]
//
// Needs root. DIR holds the btrfs image, the runtime state and the store; it
// is left in place (its loop mount too) for the next run. Default:
// /var/tmp/airlock-sandbox-bench. Bad flags: a one-line message and status 2
// (bench/bench_flags.hpp).

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "bench/actor_ask.hpp"
#include "bench/bench_flags.hpp"
#include "guest/client.hpp"
#include "storage/kv_store.hpp"
#include "worker/rootfs/overlay_driver.hpp"
#include "worker/rootfs/templates.hpp"
#include "worker/runtime/namespace_runtime.hpp"
#include "worker/worker_actor.hpp"

#ifndef AIRLOCK_GUEST_BINARY
#define AIRLOCK_GUEST_BINARY ""
#endif

namespace airlock::bench {
namespace {

using namespace airlock::worker;
using clock_type = std::chrono::steady_clock;
constexpr auto timeout = std::chrono::seconds(60);

struct bench_options {
  std::string data_dir = "/var/tmp/airlock-sandbox-bench";
  std::string guest = AIRLOCK_GUEST_BINARY;
  int creates = 40;
  int execs = 300;
  uint64_t output_mb = 1024;
  int idle = 50;
  uint32_t cpu_millis = 1000; ///< cpu limit of the throughput sandbox (the default limit)
  uint32_t window_kb = 0;     ///< output window of the throughput run; 0: the guest default
  std::string cases = "create,exec,output,memory"; ///< which measurements run
  int idle_hold_s = 0; ///< keep the idle sandboxes this long after measuring, to inspect them
  /// Wait after the last idle create before measuring: an idle agent releases
  /// its start-up page cache after agent_options::page_cache_trim_ms (1 s).
  int idle_settle_ms = 2000;
};

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

std::string percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  char line[128];
  std::snprintf(line, sizeof line, "p50 %8.3f  p90 %8.3f  p99 %8.3f ms  (n=%zu)", at(0.5), at(0.9),
                at(0.99), v.size());
  return line;
}

template <class R, class Handle, class... Ts>
result<R> ask(caf::scoped_actor& self, const Handle& dest, Ts&&... xs) {
  return ask_within<R>(self, timeout, dest, std::forward<Ts>(xs)...);
}

/// fork + exec + wait of argv; returns the exit status.
int spawn_wait(const std::vector<std::string>& argv, int stdout_fd = -1) {
  std::vector<char*> args;
  args.reserve(argv.size());
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(stdout_fd >= 0 ? stdout_fd : null, 1);
    ::dup2(null, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (stdout_fd >= 0)
    ::close(stdout_fd);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  return wstatus;
}

uint64_t mem_available_kb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:")
      return value;
  return 0;
}

/// Slab (SReclaimable + SUnreclaim), page tables and kernel stacks, in KiB.
uint64_t kernel_kb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  uint64_t total = 0;
  while (in >> key >> value >> unit)
    if (key == "Slab:" || key == "PageTables:" || key == "KernelStack:")
      total += value;
  return total;
}

/// A field of /proc/PID/smaps_rollup ("Pss:", "Anonymous:"), in KiB.
uint64_t rollup_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0)
      return std::stoull(line.substr(field.size()));
  return 0;
}

uint64_t pss_kb(pid_t pid) { return rollup_kb(pid, "Pss:"); }

std::vector<pid_t> cgroup_pids(const sandbox_handle& handle) {
  std::vector<pid_t> pids;
  for (const auto& dir : handle.cgroup_paths) {
    std::ifstream in(dir + "/cgroup.procs");
    pid_t pid = 0;
    while (in >> pid)
      pids.push_back(pid);
    if (!pids.empty())
      break;
  }
  return pids;
}

/// The memory cgroup directory of a sandbox (the v1 memory hierarchy, or the
/// v2 directory).
std::string memory_cgroup(const sandbox_handle& handle) {
  for (const auto& dir : handle.cgroup_paths)
    if (dir.find("/memory/") != std::string::npos || dir.find("/memory") == std::string::npos)
      if (std::ifstream(dir + "/memory.stat"))
        return dir;
  return {};
}

/// Sums, in KiB, over sandboxes: the cgroup's charge split into what it is
/// made of. v1: usage_in_bytes = rss + cache (page cache: file pages and
/// shmem/tmpfs) + kmem (slab, stacks, page tables); v2: memory.current with
/// anon, file, shmem, kernel_stack, slab, pagetables.
struct cgroup_breakdown {
  std::map<std::string, uint64_t> kib; ///< field -> KiB summed over sandboxes
  uint64_t kmem_kib = 0;               ///< v1 memory.kmem.usage_in_bytes
};

void add_cgroup_breakdown(const std::string& dir, cgroup_breakdown& into) {
  static const std::set<std::string> fields = {
    "rss",           "cache",       "shmem",         "mapped_file", "active_file",
    "inactive_file", "active_anon", "inactive_anon", "anon",        "file",
    "kernel_stack",  "slab",        "pagetables",    "sock",        "file_mapped"};
  std::ifstream stat(dir + "/memory.stat");
  std::string key;
  uint64_t value = 0;
  while (stat >> key >> value)
    if (fields.count(key) != 0)
      into.kib[key] += value / 1024;
  std::ifstream kmem(dir + "/memory.kmem.usage_in_bytes");
  if (kmem >> value)
    into.kmem_kib += value / 1024;
}

struct host_pieces {
  std::shared_ptr<namespace_runtime> runtime;
  std::shared_ptr<rootfs_driver> rootfs;
  std::shared_ptr<storage::kv_store> store;
};

/// Whether two files hold the same bytes.
bool same_contents(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::ifstream fa(a, std::ios::binary);
  std::ifstream fb(b, std::ios::binary);
  if (!fa || !fb)
    return false;
  std::istreambuf_iterator<char> end;
  return std::equal(std::istreambuf_iterator<char>(fa), end, std::istreambuf_iterator<char>(fb),
                    end);
}

result<host_pieces> open_host(const bench_options& opt) {
  host_pieces host;
  namespace_runtime_options rt;
  rt.state_dir = opt.data_dir + "/runtime";
  rt.cgroups.parent = "airlock-bench";
  rt.net.nft_table = "airlock_bench";
  rt.net.interface_prefix = "ab";
  rt.address_pool = "10.202.0.0/16";
  rt.id_range_base = 400000000;
  rt.slots_max = 256;
  auto runtime = namespace_runtime::open(rt);
  if (!runtime)
    return runtime.error();
  host.runtime = std::move(*runtime);
  auto store = storage::open_rocksdb_store(opt.data_dir + "/store");
  if (!store)
    return store.error();
  host.store = std::move(*store);
  rootfs_options fs;
  fs.data_dir = opt.data_dir;
  fs.image_size_mb = 8192;
  fs.disk_quota = false;
  auto driver = make_rootfs_driver(fs);
  if (!driver)
    return driver.error();
  host.rootfs = std::move(*driver);
  template_options templates;
  templates.guest_binary = opt.guest;
  template_builder builder(*host.rootfs, templates);
  if (auto built = builder.ensure("minimal"); !built)
    return built.error();
  // A template keeps the agent it was built with: rebuild it when the agent
  // changed, so that every case measures the agent built now.
  auto root = host.rootfs->template_path("minimal");
  if (root && !same_contents(*root / "sbin" / "airlock-guest", opt.guest)) {
    std::cout << "rebuilding minimal: its agent differs from " << opt.guest << "\n";
    if (auto rebuilt = builder.rebuild("minimal"); !rebuilt)
      return rebuilt.error();
  }
  return host;
}

sandbox_handle handle_of(const host_pieces& host, const std::string& id) {
  for (auto& handle : host.runtime->list())
    if (handle.id == id)
      return handle;
  return {};
}

void bench_create(caf::scoped_actor& self, const worker_actor& worker, const bench_options& opt) {
  std::vector<double> sandbox_ms;
  for (int i = 0; i < opt.creates; ++i) {
    create_sandbox_request request;
    request.id = "bc-" + std::to_string(i);
    auto start = clock_type::now();
    auto created = ask<sandbox_actor>(self, worker, wk_create_atom::value, request);
    sandbox_ms.push_back(ms_since(start));
    if (!created) {
      std::cerr << "create failed: " << created.error().message << "\n";
      return;
    }
    (void)ask<bool>(self, worker, wk_destroy_atom::value, request.id);
  }
  std::vector<double> bwrap_ms;
  for (int i = 0; i < opt.creates; ++i) {
    auto start = clock_type::now();
    int rc = spawn_wait({"/usr/bin/bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"});
    bwrap_ms.push_back(ms_since(start));
    if (rc != 0) {
      std::cerr << "bwrap failed: status " << rc << "\n";
      break;
    }
  }
  std::cout << "create to guest-ready   sandbox  " << percentiles(sandbox_ms) << "\n"
            << "                        bwrap    " << percentiles(bwrap_ms) << "\n";
}

void bench_exec(caf::scoped_actor& self, const worker_actor& worker, const bench_options& opt) {
  create_sandbox_request request;
  request.id = "bench-exec";
  auto box = ask<sandbox_actor>(self, worker, wk_create_atom::value, request);
  if (!box) {
    std::cerr << "create failed: " << box.error().message << "\n";
    return;
  }
  std::vector<double> guest_ms;
  for (int i = 0; i < opt.execs; ++i) {
    exec_spec exec;
    exec.argv = {"true"};
    auto start = clock_type::now();
    auto proc = ask<std::string>(self, *box, sbx_exec_atom::value, exec);
    if (!proc) {
      std::cerr << "exec failed: " << proc.error().message << "\n";
      return;
    }
    for (;;) {
      auto reply =
        ask<read_reply>(self, *box, sbx_read_atom::value, read_request{*proc, 1, 0, 0, 10000});
      if (!reply || reply->exited)
        break;
    }
    guest_ms.push_back(ms_since(start));
  }
  std::vector<double> host_ms;
  for (int i = 0; i < opt.execs; ++i) {
    auto start = clock_type::now();
    (void)spawn_wait({"/bin/true"});
    host_ms.push_back(ms_since(start));
  }
  std::cout << "exec round trip `true`  sandbox  " << percentiles(guest_ms) << "\n"
            << "                        host     " << percentiles(host_ms) << "\n";

  // Output into the sandbox actor (ring buffers; nobody reads: measures ingest).
  exec_spec big;
  big.cmd = "dd if=/dev/zero bs=65536 count=" + std::to_string(opt.output_mb * 16) + " 2>/dev/null";
  auto start = clock_type::now();
  auto proc = ask<std::string>(self, *box, sbx_exec_atom::value, big);
  if (proc) {
    for (;;) {
      auto info = ask<process_view>(self, *box, sbx_status_atom::value, *proc);
      if (!info || info->state == process_state::exited) {
        double s = ms_since(start) / 1000;
        if (info) {
          std::printf("output %-24s %8.1f MiB/s (%llu bytes)\n", "actor ring, busybox dd",
                      static_cast<double>(info->stdout_bytes) / (1 << 20) / s,
                      static_cast<unsigned long long>(info->stdout_bytes));
        }
        break;
      }
      (void)ask<read_reply>(self, *box, sbx_read_atom::value,
                            read_request{*proc, 1, info->stdout_bytes, 1, 1000});
    }
  }
  (void)ask<bool>(self, worker, wk_destroy_atom::value, request.id);
}

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
/// When `guest_binary` is set it replaces the sandbox's /sbin/airlock-guest
/// (in the sandbox's own layer, not the template), so that a cached template
/// built with an older agent measures the agent built now.
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
  std::error_code ec;
  if (!guest_binary.empty()
      && !std::filesystem::copy_file(guest_binary, *root / "sbin" / "airlock-guest",
                                     std::filesystem::copy_options::overwrite_existing, ec)) {
    std::cerr << "copy the guest into the " << template_name << " sandbox: " << ec.message()
              << "\n";
  }
  int pair[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair);
  sandbox_launch_spec spec;
  spec.id = id;
  spec.rootfs_path = root->string();
  spec.init_argv = {"/sbin/airlock-guest", "--fd", "3"};
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
    host, *host.rootfs, "minimal", "",
    {{"guest, busybox head", "head -c " + bytes + " /dev/zero"},
     {"guest, busybox dd", "dd if=/dev/zero bs=65536 count=" + blocks + " 2>/dev/null"}},
    opt);
  raw_pipe("raw pipe, busybox head", {"/bin/busybox", "head", "-c", bytes, "/dev/zero"});
  raw_pipe("raw pipe, busybox dd",
           {"/bin/busybox", "dd", "if=/dev/zero", "bs=65536", "count=" + blocks});
}

void bench_memory(caf::scoped_actor& self, const worker_actor& worker, host_pieces& host,
                  const bench_options& opt) {
  ::sync();
  const uint64_t before = mem_available_kb();
  const uint64_t kernel_before = kernel_kb();
  const uint64_t worker_before = pss_kb(::getpid());
  std::vector<std::string> ids;
  for (int i = 0; i < opt.idle; ++i) {
    create_sandbox_request request;
    request.id = "idle-" + std::to_string(i);
    request.network = true;
    auto box = ask<sandbox_actor>(self, worker, wk_create_atom::value, request);
    if (!box) {
      std::cerr << "idle create " << i << " failed: " << box.error().message << "\n";
      break;
    }
    ids.push_back(request.id);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(opt.idle_settle_ms));
  ::sync();
  const uint64_t after = mem_available_kb();
  const uint64_t kernel_after = kernel_kb();
  const uint64_t worker_after = pss_kb(::getpid());
  uint64_t pss_total = 0;
  uint64_t anon_total = 0;
  uint64_t cgroup_total = 0;
  cgroup_breakdown breakdown;
  for (const auto& id : ids) {
    auto handle = handle_of(host, id);
    add_cgroup_breakdown(memory_cgroup(handle), breakdown);
    for (pid_t pid : cgroup_pids(handle))
      pss_total += pss_kb(pid), anon_total += rollup_kb(pid, "Anonymous:");
    if (auto stats = host.runtime->stats(id))
      cgroup_total += stats->memory_bytes / 1024;
  }
  const double n = static_cast<double>(std::max<size_t>(ids.size(), 1));
  const double delta_kb = before > after ? static_cast<double>(before - after) : 0;
  std::printf("idle sandboxes           %zu\n", ids.size());
  std::printf("  PSS of processes       %8.1f KiB per sandbox\n",
              static_cast<double>(pss_total) / n);
  std::printf("  anonymous of processes %8.1f KiB per sandbox\n",
              static_cast<double>(anon_total) / n);
  std::printf("  memory cgroup usage    %8.1f KiB per sandbox\n",
              static_cast<double>(cgroup_total) / n);
  for (const auto& [field, kib] : breakdown.kib)
    std::printf("    memory.stat %-14s %8.1f KiB per sandbox\n", field.c_str(),
                static_cast<double>(kib) / n);
  if (breakdown.kmem_kib > 0)
    std::printf("    kmem.usage (v1)        %8.1f KiB per sandbox\n",
                static_cast<double>(breakdown.kmem_kib) / n);
  std::printf("  worker process PSS     %8.1f KiB per sandbox (link thread, client, actor)\n",
              (static_cast<double>(worker_after) - static_cast<double>(worker_before)) / n);
  std::printf("  kernel slab+pt+stacks  %8.1f KiB per sandbox\n",
              (static_cast<double>(kernel_after) - static_cast<double>(kernel_before)) / n);
  std::printf("  MemAvailable delta     %8.1f KiB per sandbox (%.1f MiB total; %llu -> %llu KiB)\n",
              delta_kb / n, delta_kb / 1024, static_cast<unsigned long long>(before),
              static_cast<unsigned long long>(after));
  // Held per sandbox: the PSS of its processes (the guest's text is mapped
  // from the sandbox's own snapshot, a page-cache copy per sandbox, and mapped
  // text is not reclaimed in practice), the kernel's objects for it and the
  // worker's share. MemAvailable moves by more than this with the rest of the
  // host's activity, so its delta is shown but not used.
  const double own_kb = (static_cast<double>(pss_total) + static_cast<double>(kernel_after)
                         - static_cast<double>(kernel_before) + static_cast<double>(worker_after)
                         - static_cast<double>(worker_before))
                        / n;
  if (own_kb > 0) {
    std::printf("  host memory held       %8.1f KiB per sandbox -> ~%.0f idle sandboxes fit in "
                "MemAvailable (%llu MiB)\n",
                own_kb, static_cast<double>(after) / own_kb,
                static_cast<unsigned long long>(after / 1024));
  }
  if (opt.idle_hold_s > 0) {
    std::cout << "holding the idle sandboxes for " << opt.idle_hold_s << " s" << std::endl;
    std::this_thread::sleep_for(std::chrono::seconds(opt.idle_hold_s));
  }
  for (const auto& id : ids)
    (void)ask<bool>(self, worker, wk_destroy_atom::value, id);
}

int run(const bench_options& opt) {
  if (::geteuid() != 0) {
    std::cerr << "sandbox_bench needs root\n";
    return 2;
  }
  auto host = open_host(opt);
  if (!host) {
    std::cerr << "setup failed: " << host.error().message << "\n";
    return 1;
  }
  actors::system_config config;
  caf::actor_system system{config};
  auto worker =
    spawn_worker(system, worker_context{host->runtime, host->rootfs, host->store, nullptr, {}});
  {
    caf::scoped_actor self{system};
    auto report = ask<recover_report>(self, worker, wk_recover_atom::value);
    if (report && !report->cleaned.empty())
      std::cout << "cleaned " << report->cleaned.size() << " sandboxes of an earlier run\n";
    std::cout << "sandbox_bench: " << std::thread::hardware_concurrency() << " cores, rootfs "
              << host->rootfs->kind() << ", cgroups " << host->runtime->cgroup_driver_name()
              << "\n";
    auto wanted = [&opt](std::string_view name) {
      return opt.cases.find(name) != std::string::npos;
    };
    if (wanted("create"))
      bench_create(self, worker, opt);
    if (wanted("exec"))
      bench_exec(self, worker, opt);
    if (wanted("output"))
      bench_output_direct(*host, opt);
    if (wanted("memory"))
      bench_memory(self, worker, *host, opt);
    self->send_exit(worker, caf::exit_reason::user_shutdown);
    self->wait_for(worker);
  }
  return 0;
}

} // namespace
} // namespace airlock::bench

int main(int argc, char** argv) {
  airlock::bench::bench_options opt;
  airlock::bench::bench_flags flags{
    "sandbox_bench", "Sandboxes on this host (create, exec, output, memory) against host-only\n"
                     "baselines. Needs root."};
  flags.text("data-dir", opt.data_dir, "DIR", "btrfs image, runtime state and store (kept)")
    .text("guest", opt.guest, "PATH", "the airlock-guest binary")
    .integer("creates", opt.creates, "sandboxes created one after the other", 1)
    .integer("execs", opt.execs, "exec round trips", 1)
    .integer("output-mb", opt.output_mb, "MiB read in the output case", 1, 1 << 24)
    .integer("cpu-millis", opt.cpu_millis, "cpu limit of the output case's sandbox", 1, 1'000'000)
    .integer("window-kb", opt.window_kb, "output window of the output case; 0: the guest default",
             0, 1 << 20)
    .integer("idle", opt.idle, "idle sandboxes in the memory case", 1)
    .integer("idle-settle-ms", opt.idle_settle_ms, "wait after the last idle create", 0, 3'600'000)
    .integer("idle-hold-s", opt.idle_hold_s, "keep the idle sandboxes this long to inspect them", 0,
             86'400)
    .names("cases", opt.cases, {"create", "exec", "output", "memory"}, "which cases run");
  if (auto status = flags.parse(argc, argv))
    return *status;
  try {
    return airlock::bench::run(opt);
  } catch (const std::exception& e) {
    std::cerr << "sandbox_bench: " << e.what() << "\n";
    return 1;
  }
}
