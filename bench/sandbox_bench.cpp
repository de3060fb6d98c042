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
//   checkpoint  a checkpoint through the worker (freeze, read-only snapshot,
//            thaw) vs a bare read-only btrfs snapshot of the same subvolume,
//            with the sandbox idle and with a writer running in it
//
//   sandbox_bench [--data-dir DIR] [--guest PATH] [--creates N] [--execs N]
//                 [--output-mb N] [--idle N] [--cases create,exec,output,memory]
//                 [--idle-settle-ms N] [--idle-hold-s N] [--cpu-millis N]
//                 [--window-kb N] [--checkpoints N] [--help]
//
// Needs root. DIR holds the btrfs image, the runtime state and the store; it
// is left in place (its loop mount too) for the next run. Default:
// /var/tmp/airlock-sandbox-bench. Bad flags: a one-line message and status 2
// (bench/bench_flags.hpp).
//
// The cases are in bench/sandbox/: common (flags, timing, the host), latency
// (create, exec), output, memory, checkpoint; this file runs them in order and parses the
// flags.

#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include "actors/system_config.hpp"
#include "bench/bench_flags.hpp"
#include "bench/sandbox/cases.hpp"
#include "bench/sandbox/common.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::sandbox_bench {
namespace {

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
  auto guest = worker::open_guest_binary(opt.guest);
  if (!guest) {
    std::cerr << "setup failed: " << guest.error().message << "\n";
    return 1;
  }
  worker_context context;
  context.runtime = host->runtime;
  context.rootfs = host->rootfs;
  context.store = host->store;
  context.guest = *guest;
  auto worker = spawn_worker(system, std::move(context));
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
    if (wanted("checkpoint"))
      bench_checkpoint(self, worker, *host, opt);
    self->send_exit(worker, caf::exit_reason::user_shutdown);
    self->wait_for(worker);
  }
  return 0;
}

} // namespace
} // namespace airlock::sandbox_bench

int main(int argc, char** argv) {
  airlock::sandbox_bench::bench_options opt;
  airlock::bench::bench_flags flags{
    "sandbox_bench",
    "Sandboxes on this host (create, exec, output, memory, checkpoint) against\nhost-only "
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
    .integer("checkpoints", opt.checkpoints, "checkpoints per measurement of the checkpoint case",
             1, 100'000)
    .names("cases", opt.cases, {"create", "exec", "output", "memory", "checkpoint"},
           "which cases run");
  if (auto status = flags.parse(argc, argv))
    return *status;
  try {
    return airlock::sandbox_bench::run(opt);
  } catch (const std::exception& e) {
    std::cerr << "sandbox_bench: " << e.what() << "\n";
    return 1;
  }
}
