// egress_bench: what the flags set (see egress_bench.cpp's main).

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace airlock::egress_bench {

struct bench_options {
  int small = 2000;
  int connections = 200;
  uint64_t large_mb = 256;
  std::string cases = "small,connections,large";
  size_t proxy_threads = 1; ///< egress_proxy_options::network_threads (the worker's default)
  uint32_t relay_chunk_kb =
    0; ///< connection_proxy_options::relay_chunk_bytes / 1024; 0: the default
};

} // namespace airlock::egress_bench
