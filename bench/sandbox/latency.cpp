// sandbox_bench: create and exec latency (and output into the sandbox
// actor's ring), each against its host-only baseline.

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench/sandbox/cases.hpp"

namespace airlock::sandbox_bench {

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

} // namespace airlock::sandbox_bench
