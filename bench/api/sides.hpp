#pragma once
// api_bench's sides, run one after the other: each fills its part of
// `results` (see api_bench.cpp for what each measures).

#include "bench/api/common.hpp"

namespace airlock::api_bench {

/// Create, exec and output through a child `airlockd serve` (http_side.cpp):
/// appends the four rows with their HTTP figures, and the SSE rate.
void run_http(const bench_options& opt, results& out);

/// The same through the node actor of an in-process worker (node_side.cpp):
/// fills the node figures of the rows run_http appended, and the read rate.
void run_node(const bench_options& opt, results& out);

/// The output command on the host into a pipe read here (pipe_side.cpp).
void run_pipe(const bench_options& opt, results& out);

} // namespace airlock::api_bench
