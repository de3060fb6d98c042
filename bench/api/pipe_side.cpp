// api_bench's ceiling: the output command on the host into a raw pipe, no
// sandbox, no guest, no HTTP.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>
#include <vector>

#include "bench/api/sides.hpp"

namespace airlock::api_bench {

/// The same command on the host (GNU yes and head, not busybox) into a pipe
/// that this process reads 64 KiB at a time.
void run_pipe(const bench_options& opt, results& out) {
  if (opt.output_mb == 0)
    return;
  auto start = clock_type::now();
  FILE* pipe = ::popen(output_command(opt).c_str(), "r");
  if (pipe == nullptr)
    return;
  std::vector<char> chunk(1 << 16);
  uint64_t total = 0;
  int fd = ::fileno(pipe);
  for (ssize_t n; (n = ::read(fd, chunk.data(), chunk.size())) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    total += static_cast<uint64_t>(n);
  }
  ::pclose(pipe);
  out.pipe_mib_s = static_cast<double>(total) / (1 << 20) / (ms_since(start) / 1000);
  if (total != opt.output_mb << 20)
    std::cerr << "raw pipe delivered " << total << " bytes\n";
}

} // namespace airlock::api_bench
