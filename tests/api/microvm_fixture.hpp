#pragma once
// The daemon configuration the API suites that run microVMs share
// (microvm_test.cpp, runtime_parity_test.cpp): one `serve --microvm on`
// under TCG per executable, as the suites are of one serve_suite type.

#include <string>

#include "tests/api/api_fixture.hpp"
#include "tests/api/microvm_support.hpp"

namespace airlock::test {

/// The API suites' instance (and lock), with the microvm runtime on.
struct microvm_suite_config {
  static constexpr const char* lock_path = "/run/airlock-api-e2e.lock";
  static constexpr const char* what = "the microvm API tests run VMs";
  static serve_process::options options() {
    serve_process::options opts;
    opts.extra_args = microvm_serve_args(AIRLOCK_SOURCE_DIR);
    // VMs of one base share its pages here (the egress suite runs the default, copies).
    opts.extra_args.insert(opts.extra_args.end(), {"--microvm-share-memory", "true"});
    return opts;
  }
};

} // namespace airlock::test
