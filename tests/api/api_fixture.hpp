#pragma once
// The fixture every API test suite derives from: one `airlockd serve` per
// test suite (started in SetUpTestSuite, stopped and unmounted in
// TearDownTestSuite), skipped with a reason when the tests do not run as root.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/api/api_support.hpp"

namespace airlock::test {

class api_suite : public ::testing::Test {
public:
  static void SetUpTestSuite() {
    start_error_.clear();
    if (!running_as_root())
      return;
    // One suite at a time on this host (ctest runs each test as its own
    // process): they share the apie2e instance, veth prefix and pool.
    lock_ = std::make_unique<host_lock>("/run/airlock-api-e2e.lock");
    server_ = serve_process::start(serve_process::options{}, start_error_);
  }

  static void TearDownTestSuite() {
    server_.reset();
    lock_.reset();
  }

protected:
  void SetUp() override {
    if (!running_as_root())
      GTEST_SKIP() << *root_missing("the API end-to-end tests run sandboxes");
    ASSERT_TRUE(server_) << start_error_;
  }

  /// A client with the admin key.
  static api_client admin() { return {server_->host(), server_->port(), server_->admin_key()}; }
  /// A client with another credential (or none: "").
  static api_client as(const std::string& credential) {
    return {server_->host(), server_->port(), credential};
  }
  static const serve_process& server() { return *server_; }
  /// False when the suite's server did not start (or the tests are skipped).
  static bool has_server() { return server_ != nullptr; }

private:
  static inline std::unique_ptr<host_lock> lock_;
  static inline std::unique_ptr<serve_process> server_;
  static inline std::string start_error_;
};

} // namespace airlock::test
