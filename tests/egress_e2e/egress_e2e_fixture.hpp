#pragma once
// The egress end-to-end suite's fixture: one real `airlockd serve` whose
// egress proxy resolves with a static name map and trusts the test upstream
// CA, "the internet" in a network namespace (upstream_world.hpp), and `base`
// sandboxes of the runtime under test with the red team's probe in them.
// The same airlockd runs both runtimes: the microvm one is on where this host
// can boot the guest, and the microvm instances skip with the reason where not.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/api/api_support.hpp"
#include "tests/egress_e2e/upstream_world.hpp"

namespace airlock::test {

using nlohmann::json;

/// The secret of the injected credential; must never reach a sandbox.
inline const std::string secret = "sk-airlock-e2e-" + std::to_string(::getpid()) + "-do-not-leak";

/// The runtimes every case runs in.
inline constexpr const char* namespace_runtime = "namespace";
inline constexpr const char* microvm_runtime = "microvm";

/// The egress most cases give their sandbox.
inline const json allow_api = {{"profile", "allowlist"}, {"allow", {"api.test"}}};

class egress_e2e : public ::testing::TestWithParam<std::string> {
public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

protected:
  void SetUp() override;
  /// Each test's sandboxes go, so that the next ones have room on two cores.
  void TearDown() override;

  /// The case cannot hold for a VM: skipped there, saying why.
  void not_for_microvm(const std::string& why);

  static api_client admin() { return {server_->host(), server_->port(), server_->admin_key()}; }

  /// A running `base` sandbox of this instance's runtime with `egress` and the
  /// probe at /root/probe.py. With a null `egress` the create names none (the
  /// template's default applies).
  std::string sandbox_with(const json& egress);

  /// Runs a shell line in the sandbox; its stdout (stderr appended).
  static std::string run(const std::string& id, const std::string& cmd);
  /// Runs probe.py with `args` in the sandbox; what it printed.
  static std::string probe(const std::string& id, const std::string& args);
  /// `text` without its trailing newline.
  static std::string line_of(std::string text);

  /// Polls GET /v1/audit until a record of the sandbox matches; its JSON or null.
  static json audit_find(const std::string& id, const std::string& kind,
                         const std::function<bool(const json&)>& match);
  /// The audit record of a denial of `kind` whose target and reason contain the parts; or null.
  static json denied(const std::string& id, const std::string& kind, const std::string& target_part,
                     const std::string& reason_part = "");

  static inline std::unique_ptr<host_lock> lock_;
  static inline std::unique_ptr<upstream_world> world_;
  static inline std::unique_ptr<serve_process> server_;
  static inline std::string start_error_;
  static inline std::string microvm_missing_;
  static inline std::vector<std::string> created_;
};

/// Regular files under `root` (templates excepted: built before any secret
/// existed) that contain `needle`.
std::vector<std::string> files_containing(const std::string& root, const std::string& needle);

/// Host pids of the processes in sandbox `id`'s cgroup.
std::vector<int> sandbox_pids(const std::string& id);

/// True when `needle` is in the environment or any readable mapping of `pid`.
bool process_holds(int pid, const std::string& needle);

} // namespace airlock::test
