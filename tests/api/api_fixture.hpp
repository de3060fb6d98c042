#pragma once
// The fixture every API test suite derives from: one `airlockd serve` per
// test suite (started in SetUpTestSuite, stopped and unmounted in
// TearDownTestSuite), skipped with a reason when the tests do not run as root.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/api/api_support.hpp"

namespace airlock::test {

/// One `airlockd serve` per test suite, as `Config` describes it:
/// `Config::lock_path` (suites sharing an instance take turns on this host),
/// `Config::options()` and `Config::what` (why the suite needs root).
template <class Config>
class serve_suite : public ::testing::Test {
public:
  static void SetUpTestSuite() {
    start_error_.clear();
    if (!running_as_root())
      return;
    lock_ = std::make_unique<host_lock>(Config::lock_path);
    server_ = serve_process::start(Config::options(), start_error_);
  }

  static void TearDownTestSuite() {
    server_.reset();
    lock_.reset();
  }

protected:
  void SetUp() override {
    if (!running_as_root())
      GTEST_SKIP() << *root_missing(Config::what);
    ASSERT_TRUE(server_) << start_error_;
  }

  /// A client with the admin key.
  static api_client admin() { return {server_->host(), server_->port(), server_->admin_key()}; }
  /// A client with another credential (or none: "").
  static api_client as(const std::string& credential) {
    return {server_->host(), server_->port(), credential};
  }
  static const serve_process& server() { return *server_; }
  /// Stops the suite's server (SIGTERM or SIGKILL) and starts it again on
  /// the same data directory; clients made before point at the old port.
  static bool restart_server(serve_process::stop_kind how, std::string& error) {
    return server_->restart(how, error);
  }
  /// False when the suite's server did not start (or the tests are skipped).
  static bool has_server() { return server_ != nullptr; }

private:
  static inline std::unique_ptr<host_lock> lock_;
  static inline std::unique_ptr<serve_process> server_;
  static inline std::string start_error_;
};

/// The API suites: one at a time on this host (ctest runs each test as its
/// own process), as they share the apie2e instance, veth prefix and pool.
struct api_suite_config {
  static constexpr const char* lock_path = "/run/airlock-api-e2e.lock";
  static constexpr const char* what = "the API end-to-end tests run sandboxes";
  static serve_process::options options() { return {}; }
};

using api_suite = serve_suite<api_suite_config>;

/// An API suite whose tests share one running sandbox, `sandbox_`, made once
/// the suite's server runs with `Suite::sandbox_shape()` (CPU, memory, ...).
template <class Suite>
class sandbox_suite : public api_suite {
public:
  static void SetUpTestSuite() {
    api_suite::SetUpTestSuite();
    if (has_server())
      sandbox_ = admin().create_running(Suite::sandbox_shape());
  }
  static void TearDownTestSuite() {
    sandbox_.clear();
    api_suite::TearDownTestSuite();
  }

protected:
  void SetUp() override {
    api_suite::SetUp();
    if (!IsSkipped()) {
      ASSERT_FALSE(sandbox_.empty()) << "the suite's sandbox did not start";
    }
  }
  static inline std::string sandbox_;
};

} // namespace airlock::test
