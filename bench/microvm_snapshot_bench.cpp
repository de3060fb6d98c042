// MicroVM memory snapshots under the real QEMU, side by side in one run:
//   clone     microvm_runtime::restore(clone) of a base snapshot + the guest's
//             refresh answered (entropy, clock, hello): agent-ready
//   raw       the same QEMU steps driven by hand, without the runtime (no
//             cgroup, no jail but QEMU's seccomp, no record check): spawn with
//             -incoming defer, QMP, x-ignore-shared, getfd, migrate-incoming,
//             cont, then the agent's answer to a ping
//   pooled    restore(clone) taking a QEMU the runtime started beforehand
//             (prepare_clones) + the refresh answered
//   cold      microvm_runtime::create + the agent's hello (a full boot)
// and for one VM: suspend (snapshot, VM removed), restore (owned RAM copy)
// and checkpoint times and the snapshot's size on disk; exec round trips in a
// clone; host memory per idle clone (PSS from /proc/PID/smaps_rollup, so the
// base's pages that clones share are counted once) and how many idle clones
// this host's memory would hold. Needs root (cgroups), QEMU, qboot and a
// guest from scripts/microvm-guest (--guest). Results: docs/benchmarks.md.

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_flags.hpp"
#include "guest/client.hpp"
#include "worker/command/command.hpp"
#include "worker/microvm/disk_image.hpp"
#include "worker/microvm/microvm_runtime.hpp"
#include "worker/microvm/qmp.hpp"

namespace airlock::bench {
namespace {

namespace fs = std::filesystem;
using namespace airlock::worker;
using namespace airlock::worker::microvm;
using clock_type = std::chrono::steady_clock;

struct bench_options {
  std::string guest;
  std::string work = "/var/tmp/airlock-microvm-snapshot-bench";
  int clones = 20;
  int raw = 10;
  int pooled = 10;
  int cold = 3;
  int idle = 8;
  int memory_mb = 256;
  int cpu_millis = 1000;
};

/// The runtime of the run, so that a failure stops its VMs (QEMU runs in a
/// session of its own and would outlive the bench).
std::unique_ptr<microvm_runtime>* running_runtime = nullptr;

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "microvm_snapshot_bench: " << what << "\n";
  if (running_runtime != nullptr)
    running_runtime->reset();
  std::exit(1);
}

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

struct series {
  std::vector<double> values;
  double pct(double p) const {
    if (values.empty())
      return 0;
    auto v = values;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1,
                      static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
  }
};

void print_row(const char* what, const series& s) {
  std::printf("| %-44s | %4zu | %8.1f | %8.1f | %8.1f | %8.1f |\n", what, s.values.size(),
              s.pct(0.5), s.pct(0.95), s.pct(0), s.pct(1));
}

std::pair<unique_fd, unique_fd> channel_pair() {
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    fail("socketpair");
  return {unique_fd(pair[0]), unique_fd(pair[1])};
}

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  std::ifstream("/dev/urandom", std::ios::binary).read(out.data(), static_cast<std::streamsize>(n));
  return out;
}

/// Pss of a process in KiB (smaps_rollup), 0 when unreadable.
uint64_t pss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == "Pss:") {
      in >> kib;
      return kib;
    }
    in.ignore(4096, '\n');
  }
  return 0;
}

uint64_t meminfo_kib(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == field + ":") {
      in >> kib;
      return kib;
    }
    in.ignore(4096, '\n');
  }
  return 0;
}

int cpu_millis_flag = 1000;

sandbox_launch_spec launch_spec(const std::string& id, int memory_mb) {
  sandbox_launch_spec spec;
  spec.id = id;
  spec.network.enabled = false;
  spec.limits.memory_mb = static_cast<uint32_t>(memory_mb);
  spec.limits.cpu_millis = static_cast<uint32_t>(cpu_millis_flag);
  return spec;
}

guest::start_request shell(const std::string& line) {
  guest::start_request request;
  request.process.cmd = line;
  request.process.env = {{"PATH", "/bin"}};
  return request;
}

/// A template image: static busybox and its shell.
std::string make_image(const std::string& work) {
  const fs::path tree = fs::path(work) / "tree";
  fs::remove_all(tree);
  for (const char* sub : {"bin", "etc", "proc", "sys", "dev", "run", "tmp", "root"})
    fs::create_directories(tree / sub);
  fs::copy_file(find_program("busybox", default_command_path), tree / "bin" / "busybox");
  for (const char* applet : {"sh", "true", "cat", "head", "sleep"})
    fs::create_symlink("busybox", tree / "bin" / applet);
  auto image = template_disk(tree.string(), work, "bench-busybox");
  if (!image)
    fail(image.error().message);
  return *image;
}

/// The raw clone: QEMU spawned by hand with the runtime's own command line
/// (vm_spec → qemu_argv, seccomp on), driven over QMP; ms to cont returned
/// and to the agent's first pong. `prespawned`: QEMU is started without the
/// channel's chardev and port and waits (untimed, as a pool would hold it);
/// the timed part hands it the channel (getfd, chardev-add, device_add of
/// the port before the state loads: QEMU 7.2 cannot swap a virtio-serial
/// port's chardev, "chardev hotswap" is refused) and loads the state.
std::pair<double, double> raw_clone(const std::string& base_dir, const guest_image& guest,
                                    const std::string& work, int n, int memory_mb,
                                    bool prespawned) {
  const std::string disk = work + "/raw-" + std::to_string(n) + ".ext4";
  fs::remove(disk);
  if (!sandbox_disk(base_dir + "/disk.ext4", disk).is_ok())
    fail("copy the base's disk");
  const std::string qmp_path = work + "/raw.qmp";
  auto [ours, theirs] = channel_pair();
  vm_spec spec;
  spec.id = "raw";
  spec.guest = guest;
  spec.disk_path = disk;
  spec.memory_mb = static_cast<uint32_t>(memory_mb);
  spec.tcg_tb_mb = 128;
  spec.memory_path = base_dir + "/memory";
  spec.memory_shared = false;
  spec.incoming = true;
  auto start = clock_type::now();
  unique_fd theirs_copy(::fcntl(theirs.get(), F_DUPFD_CLOEXEC, 0));
  ::unlink(qmp_path.c_str());
  unique_fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, qmp_path.c_str(), sizeof address.sun_path - 1);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0
      || ::listen(listener.get(), 1) != 0)
    fail("listen " + qmp_path);
  auto argv = qemu_argv(spec, find_program("qemu-system-x86_64", default_command_path),
                        vm_options{}.firmware);
  const std::string channel_chardev = "socket,id=channel,fd=" + std::to_string(channel_fd_in_vmm);
  const std::string channel_port =
    "virtserialport,chardev=channel,name=" + std::string(channel_port_name);
  if (prespawned) {
    for (size_t i = 0; i + 1 < argv.size();) {
      if (argv[i + 1] == channel_chardev || argv[i + 1] == channel_port)
        argv.erase(argv.begin() + static_cast<long>(i), argv.begin() + static_cast<long>(i) + 2);
      else
        ++i;
    }
  }
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs.get(), channel_fd_in_vmm);
  posix_spawn_file_actions_adddup2(&actions, listener.get(), qmp_fd_in_vmm);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  char* env[] = {nullptr};
  if (::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env) != 0)
    fail("spawn QEMU");
  posix_spawn_file_actions_destroy(&actions);
  theirs.reset();
  listener.reset();
  auto qmp = qmp_client::connect(qmp_path, 10'000);
  if (!qmp)
    fail("raw QMP: " + qmp.error().message);
  auto must = [&](const result<std::string>& r, const char* what) {
    if (!r)
      fail(std::string("raw ") + what + ": " + r.error().message);
  };
  if (prespawned) {
    start = clock_type::now();
    unique_fd channel(::fcntl(theirs_copy.get(), F_DUPFD_CLOEXEC, 0));
    must(qmp->execute_with_fd("getfd", R"({"fdname": "channel"})", channel.get(), 5000),
         "getfd channel");
    must(qmp->execute("chardev-add",
                      R"({"id": "channel", "backend": {"type": "socket", "data": )"
                      R"({"addr": {"type": "fd", "data": {"str": "channel"}}, "server": false}}})",
                      5000),
         "chardev-add");
    must(qmp->execute("device_add",
                      R"({"driver": "virtserialport", "chardev": "channel", "name": ")"
                        + std::string(channel_port_name) + "\"}",
                      5000),
         "device_add");
    theirs_copy.reset();
  }
  must(qmp->execute("migrate-set-capabilities",
                    R"({"capabilities": [{"capability": "x-ignore-shared", "state": true}]})",
                    5000),
       "capability");
  unique_fd state(::open((base_dir + "/state").c_str(), O_RDONLY | O_CLOEXEC));
  must(qmp->execute_with_fd("getfd", R"({"fdname": "state"})", state.get(), 5000), "getfd");
  state.reset();
  must(qmp->execute("migrate-incoming", R"({"uri": "fd:state"})", 5000), "migrate-incoming");
  for (;;) {
    auto reply = qmp->execute("query-migrate", "", 5000);
    must(reply, "query-migrate");
    if (reply->find("\"completed\"") != std::string::npos)
      break;
    if (reply->find("\"failed\"") != std::string::npos)
      fail("raw load failed: " + *reply);
    if (ms_since(start) > 10'000)
      fail("raw load timed out");
    ::usleep(1000);
  }
  must(qmp->execute("cont", "", 5000), "cont");
  const double cont_ms = ms_since(start);
  guest::guest_client client(std::move(ours));
  if (auto pong = client.ping(30'000); !pong)
    fail("raw clone's agent: " + pong.error().message);
  const double ready_ms = ms_since(start);
  (void)qmp->execute("quit", "", 5000);
  ::waitpid(pid, nullptr, 0);
  ::unlink(qmp_path.c_str());
  fs::remove(disk);
  return {cont_ms, ready_ms};
}

std::optional<int> parse_options(int argc, char** argv, bench_options& options) {
  bench_flags flags{
    "microvm_snapshot_bench",
    "MicroVM memory snapshots: clone from a base snapshot to agent-ready vs QEMU's\n"
    "raw clone vs a cold boot; suspend, restore, snapshot size; memory per clone."};
  flags.text("guest", options.guest, "DIR", "scripts/microvm-guest's output directory (required)")
    .text("work", options.work, "DIR", "scratch directory (run directory, snapshots)")
    .integer("clones", options.clones, "clones timed through the runtime", 1, 1000)
    .integer("raw", options.raw, "raw QEMU clones timed", 0, 1000)
    .integer("pooled", options.pooled, "clones timed from the runtime's pool of pre-spawned QEMUs",
             0, 60)
    .integer("cold", options.cold, "cold boots timed", 0, 100)
    .integer("idle", options.idle, "clones kept idle for the memory measure", 1, 64)
    .integer("memory-mb", options.memory_mb, "guest RAM", 64, 4096)
    .integer("cpu-millis", options.cpu_millis,
             "the VMs' CPU bound (their cgroup; the raw clones have none)", 100, 64'000);
  return flags.parse(argc, argv);
}

int run(const bench_options& options) {
  if (options.guest.empty())
    fail("--guest DIR is required (scripts/microvm-guest --agent build/guest/airlock-guest)");
  cpu_millis_flag = options.cpu_millis;
  fs::remove_all(options.work);
  fs::create_directories(options.work + "/run");
  const std::string image = make_image(options.work);
  microvm_runtime_options ro;
  ro.run_dir = options.work + "/run";
  ro.guest_dir = options.guest;
  ro.cgroups.parent = "airlock-microvm-bench";
  ro.vm.unshare = true;
  auto owned_runtime = std::make_unique<microvm_runtime>(ro);
  running_runtime = &owned_runtime;
  microvm_runtime& runtime = *owned_runtime;
  const guest_image guest = guest_image_in(options.guest);

  // Cold boots.
  series cold;
  std::unique_ptr<guest::guest_client> base_client;
  for (int i = 0; i <= options.cold; ++i) {
    auto [ours, theirs] = channel_pair();
    auto spec =
      launch_spec(i == options.cold ? "base" : "cold-" + std::to_string(i), options.memory_mb);
    spec.rootfs_path = image;
    spec.channel_fd = theirs.get();
    const auto start = clock_type::now();
    auto handle = runtime.create(spec);
    if (!handle)
      fail(handle.error().message);
    auto client = std::make_unique<guest::guest_client>(std::move(ours));
    if (auto hello = client->handshake(180'000); !hello)
      fail("cold boot: " + hello.error().message);
    if (i < options.cold) {
      cold.values.push_back(ms_since(start));
      (void)runtime.destroy(spec.id);
    } else {
      base_client = std::move(client);
    }
  }
  if (auto ran = base_client->run(shell("echo warm > /tmp/w"), "", 30'000); !ran)
    fail(ran.error().message);

  // Suspend and restore of one VM, then the base snapshot (a checkpoint).
  auto suspended = runtime.snapshot("base", options.work + "/suspended", snapshot_mode::suspend);
  if (!suspended)
    fail("suspend: " + suspended.error().message);
  base_client.reset();
  double restore_ms = 0;
  {
    auto [ours, theirs] = channel_pair();
    auto spec = launch_spec("base", options.memory_mb);
    spec.channel_fd = theirs.get();
    const auto start = clock_type::now();
    auto handle = runtime.restore(spec, options.work + "/suspended", restore_mode::owned);
    if (!handle)
      fail("restore: " + handle.error().message);
    base_client = std::make_unique<guest::guest_client>(std::move(ours));
    if (auto r = base_client->refresh(random_bytes(64), realtime_ns(), "base", "", 30'000); !r)
      fail("restore refresh: " + r.error().message);
    restore_ms = ms_since(start);
  }
  auto checkpoint = runtime.snapshot("base", options.work + "/base", snapshot_mode::checkpoint);
  if (!checkpoint)
    fail("checkpoint: " + checkpoint.error().message);
  (void)runtime.destroy("base");
  const std::string base_dir = options.work + "/base";

  // Clones through the runtime.
  series to_cont, to_ready, first_exec, exec_rtt, ping_rtt;
  std::vector<std::string> idle_ids;
  std::vector<std::unique_ptr<guest::guest_client>> idle_clients;
  for (int i = 0; i < options.clones; ++i) {
    const std::string id = "clone-" + std::to_string(i);
    auto [ours, theirs] = channel_pair();
    auto spec = launch_spec(id, options.memory_mb);
    spec.channel_fd = theirs.get();
    const auto start = clock_type::now();
    auto handle = runtime.restore(spec, base_dir, restore_mode::clone);
    if (!handle)
      fail("clone: " + handle.error().message);
    to_cont.values.push_back(ms_since(start));
    auto client = std::make_unique<guest::guest_client>(std::move(ours));
    if (auto r = client->refresh(random_bytes(64), realtime_ns(), id, "", 30'000); !r)
      fail("clone refresh: " + r.error().message);
    to_ready.values.push_back(ms_since(start));
    auto exec_once = [&](series& into) {
      const auto t = clock_type::now();
      auto ran = client->run(shell("true"), "", 30'000);
      if (!ran || ran->exit_code != 0)
        fail("exec in a clone");
      into.values.push_back(ms_since(t));
    };
    exec_once(first_exec);
    for (int k = 0; k < 3; ++k)
      exec_once(exec_rtt);
    if (auto rtt = client->ping(30'000); rtt)
      ping_rtt.values.push_back(static_cast<double>(*rtt) / 1000.0);
    if (static_cast<int>(idle_ids.size()) < options.idle) {
      idle_ids.push_back(id);
      idle_clients.push_back(std::move(client));
    } else {
      (void)runtime.destroy(id);
    }
  }
  // Idle clones: let them settle, then PSS.
  ::usleep(2'000'000);
  uint64_t pss_total = 0;
  for (const auto& h : runtime.list())
    pss_total += pss_kib(h.init_pid);
  const double pss_per_clone_mib =
    static_cast<double>(pss_total) / 1024.0 / static_cast<double>(runtime.list().size());
  for (const auto& id : idle_ids)
    (void)runtime.destroy(id);
  idle_clients.clear();

  // Clones claimed from the runtime's pool (prepared untimed, one at a time
  // so that the QEMUs starting do not compete with the one timed).
  series pool_cont, pool_pong, pool_ready, pool_refresh_after_pong;
  for (int i = 0; i < options.pooled; ++i) {
    if (auto prepared = runtime.prepare_clones(base_dir, 1); !prepared)
      fail("prepare_clones: " + prepared.error().message);
    const std::string id = "pooled-" + std::to_string(i);
    auto [ours, theirs] = channel_pair();
    auto spec = launch_spec(id, options.memory_mb);
    spec.channel_fd = theirs.get();
    const auto start = clock_type::now();
    auto handle = runtime.restore(spec, base_dir, restore_mode::clone);
    if (!handle)
      fail("pooled clone: " + handle.error().message);
    pool_cont.values.push_back(ms_since(start));
    guest::guest_client client(std::move(ours));
    // Every other one pings first: how much of agent-ready is the guest
    // waking up at all (its code through an empty TCG cache) and how much
    // the refresh's own work.
    if (i % 2 == 1) {
      if (auto pong = client.ping(30'000); !pong)
        fail("pooled clone ping: " + pong.error().message);
      pool_pong.values.push_back(ms_since(start));
    }
    if (auto r = client.refresh(random_bytes(64), realtime_ns(), id, "", 30'000); !r)
      fail("pooled clone refresh: " + r.error().message);
    if (i % 2 == 0)
      pool_ready.values.push_back(ms_since(start));
    else
      pool_refresh_after_pong.values.push_back(ms_since(start) - pool_pong.values.back());
    (void)runtime.destroy(id);
  }

  // Raw QEMU clones.
  series raw_cont, raw_ready, pre_cont, pre_ready;
  for (int i = 0; i < options.raw; ++i) {
    auto [c, r] = raw_clone(base_dir, guest, options.work, i, options.memory_mb, false);
    raw_cont.values.push_back(c);
    raw_ready.values.push_back(r);
    auto [pc, pr] = raw_clone(base_dir, guest, options.work, i, options.memory_mb, true);
    pre_cont.values.push_back(pc);
    pre_ready.values.push_back(pr);
  }

  char load[64] = {};
  std::ifstream("/proc/loadavg").read(load, sizeof load - 1);
  std::printf("microvm_snapshot_bench: %d MiB guest, %d CPU millis, TCG, load average %s\n",
              options.memory_mb, options.cpu_millis,
              std::string(load).substr(0, std::string(load).find(' ', 10)).c_str());
  std::printf("| %-44s | %4s | %8s | %8s | %8s | %8s |\n", "ms", "n", "p50", "p95", "min", "max");
  std::printf("|%s|------|----------|----------|----------|----------|\n",
              std::string(46, '-').c_str());
  print_row("clone: restore returned (QEMU running)", to_cont);
  print_row("clone: agent-ready (refresh answered)", to_ready);
  print_row("pooled clone: restore returned (running)", pool_cont);
  print_row("pooled clone: agent-ready (refresh answered)", pool_ready);
  print_row("pooled clone: first pong (others)", pool_pong);
  print_row("pooled clone: then the refresh", pool_refresh_after_pong);
  print_row("raw QEMU clone: cont returned", raw_cont);
  print_row("raw QEMU clone: agent's first pong", raw_ready);
  print_row("pre-spawned raw clone: cont returned", pre_cont);
  print_row("pre-spawned raw clone: agent's first pong", pre_ready);
  print_row("cold boot: agent's hello", cold);
  print_row("exec `true` in a clone, first", first_exec);
  print_row("exec `true` in a clone, then", exec_rtt);
  print_row("ping in a clone", ping_rtt);
  std::printf("suspend (%d MiB VM): %lld ms (device state saved in %lld ms); restore to "
              "agent-ready %.0f ms; checkpoint %lld ms\n",
              options.memory_mb, static_cast<long long>(suspended->total_ms),
              static_cast<long long>(suspended->save_ms), restore_ms,
              static_cast<long long>(checkpoint->total_ms));
  std::printf("snapshot on disk: state %.0f KiB, memory %.1f MiB (of %d), disk %.1f MiB\n",
              static_cast<double>(suspended->state_bytes) / 1024.0,
              static_cast<double>(suspended->memory_bytes) / 1048576.0, options.memory_mb,
              static_cast<double>(suspended->disk_bytes) / 1048576.0);
  const double total_mib = static_cast<double>(meminfo_kib("MemTotal")) / 1024.0;
  std::printf("idle clone: PSS %.1f MiB each (%zu clones, shared pages split among them); "
              "MemTotal %.0f MiB holds ~%.0f idle clones by PSS\n",
              pss_per_clone_mib, idle_ids.size(), total_mib,
              pss_per_clone_mib > 0 ? total_mib / pss_per_clone_mib : 0.0);
  running_runtime = nullptr;
  owned_runtime.reset();
  fs::remove_all(options.work);
  return 0;
}

} // namespace
} // namespace airlock::bench

int main(int argc, char** argv) {
  using namespace airlock::bench;
  bench_options options;
  if (auto status = parse_options(argc, argv, options))
    return *status;
  return run(options);
}
