// What the HTTP API adds on top of the worker, side by side in one run:
//   create   POST /v1/sandboxes + GET /v1/operations/{id}?wait=60 until the
//            sandbox runs, vs nd_create on the node actor in-process (the
//            call the operation's worker step makes), at 1 and 16 clients
//   exec     POST /v1/sandboxes/{id}/processes (`true`) + GET {attach_url}?wait
//            until exited, vs dp_exec + dp_proc(wait) on the node actor
//   output   `head -c SIZE /dev/zero | tr '\0' x` read through the SSE output
//            stream, vs the same command read with dp_output on the node
//            actor (the reads the SSE route makes: 64 KiB, one in flight),
//            and the host's own `yes | head -c SIZE` into a raw pipe read by
//            this process (the ceiling: no sandbox, no guest, no HTTP)
// HTTP clients use one keep-alive connection each. The HTTP side is a child
// `airlockd serve` (control plane and local worker in one process); the
// worker side is airlockd's own worker_host in this process. They run one
// after the other, never at once, on separate instances and data dirs.
//
//   api_bench [--airlockd PATH] [--data-dir DIR] [--creates N] [--execs N]
//             [--output-mb N] [--clients N] [--output-cpu-millis N] [--help]
//
// Needs root. DIR (default /var/tmp/airlock-api-bench) keeps the btrfs images
//
// The pieces are in bench/api/: common (flags, timing, the table),
// http_client, http_side, node_side, pipe_side; this file runs the sides in
// order and prints the table.

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "bench/api/common.hpp"
#include "bench/api/sides.hpp"

int main(int argc, char** argv) {
  using namespace airlock::api_bench;
  bench_options opt;
  if (auto status = parse_args(argc, argv, opt))
    return *status;
  if (::geteuid() != 0) {
    std::cerr << "api_bench needs root (sandboxes)\n";
    return 1;
  }
  try {
    results out;
    run_http(opt, out);
    if (out.rows.size() != 4) {
      std::cerr << "the HTTP side failed; no table\n";
      return 1;
    }
    run_node(opt, out);
    run_pipe(opt, out);
    std::printf("%-22s %8s %8s %8s | %8s %8s %8s | %8s\n", "ms", "http p50", "p90", "p99",
                "node p50", "p90", "p99", "diff p50");
    for (const auto& r : out.rows)
      print_row(r);
    std::printf("output %llu MiB          SSE %8.1f MiB/s | node reads %8.1f MiB/s | raw pipe "
                "%8.1f MiB/s\n",
                static_cast<unsigned long long>(opt.output_mb), out.http_mib_s, out.node_mib_s,
                out.pipe_mib_s);
  } catch (const std::exception& e) {
    std::cerr << "api_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
