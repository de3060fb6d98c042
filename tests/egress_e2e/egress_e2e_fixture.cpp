#include "tests/egress_e2e/egress_e2e_fixture.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/api/microvm_support.hpp"

namespace airlock::test {
namespace {

using steady = std::chrono::steady_clock;

constexpr const char* probe_source = AIRLOCK_PROBE_PY;
/// The first create builds the `base` template (debootstrap): minutes.
constexpr milliseconds first_create_wait{900'000};

/// True when `needle` occurs in the file (read in blocks with an overlap).
bool file_contains(const std::filesystem::path& path, const std::string& needle) {
  std::ifstream in(path, std::ios::binary);
  std::string carry;
  std::vector<char> block(1 << 20);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    std::string text = carry + std::string(block.data(), static_cast<size_t>(in.gcount()));
    if (text.find(needle) != std::string::npos)
      return true;
    carry = text.size() >= needle.size() ? text.substr(text.size() - needle.size() + 1) : text;
  }
  return false;
}

} // namespace

void egress_e2e::SetUpTestSuite() {
  start_error_.clear();
  if (!running_as_root())
    return;
  microvm_missing_ = microvm_missing();
  lock_ = std::make_unique<host_lock>("/run/airlock-egress-e2e.lock");
  world_ = upstream_world::start(start_error_);
  if (!world_)
    return;
  serve_process::options options;
  options.instance = "egre2e";
  options.veth_prefix = "ee";
  options.address_pool = "10.207.0.0/16";
  options.uid_base = 1'000'000'000;
  options.image_size_mb = 8192;
  options.extra_args = {"--egress-hosts-file", world_->hosts_file(), "--egress-upstream-ca",
                        world_->ca_file(),     "--template-egress",  "base=allowlist:api.test"};
  if (microvm_missing_.empty())
    for (auto& arg : microvm_serve_args(AIRLOCK_SOURCE_DIR))
      options.extra_args.push_back(std::move(arg));
  server_ = serve_process::start(options, start_error_);
}

void egress_e2e::TearDownTestSuite() {
  server_.reset();
  world_.reset();
  lock_.reset();
}

void egress_e2e::SetUp() {
  if (!running_as_root())
    GTEST_SKIP() << *root_missing(
      "the egress end-to-end tests run sandboxes and network namespaces");
  if (GetParam() == microvm_runtime && !microvm_missing_.empty())
    GTEST_SKIP() << "microvm: " << microvm_missing_;
  ASSERT_TRUE(server_) << start_error_;
}

void egress_e2e::TearDown() {
  for (const auto& id : created_) {
    auto deleted = admin().call("DELETE", "/v1/sandboxes/" + id);
    if (deleted.status == 202) {
      auto op = admin().wait_operation(deleted.json.value("operation_id", ""));
      EXPECT_EQ(op.value("state", ""), "succeeded") << "delete of " << id << ": " << op.dump();
    }
  }
  created_.clear();
}

void egress_e2e::not_for_microvm(const std::string& why) {
  if (GetParam() == microvm_runtime)
    GTEST_SKIP() << "not for microvm sandboxes: " << why;
}

std::string egress_e2e::sandbox_with(const json& egress) {
  auto client = admin();
  json spec = {{"template", "base"}, {"cpu_millis", 200}, {"memory_mb", 256}};
  if (GetParam() == microvm_runtime) {
    // A whole core: QEMU is bounded by the sandbox's CPU, and the guest
    // kernel boots under emulation. The request stays the default: two VMs
    // asking a core each would fill this 2-core worker until its next
    // heartbeat reports their deletes.
    spec["runtime"] = microvm_runtime;
    spec["cpu_millis"] = 1000;
  }
  if (!egress.is_null())
    spec["egress"] = egress;
  auto created = client.create(spec);
  if (created.status != 202) {
    ADD_FAILURE() << "create answered " << created.status << ": " << created.body;
    return "";
  }
  std::string op_id = created.json.value("operation_id", "");
  auto deadline = steady::now() + first_create_wait;
  json op;
  while (steady::now() < deadline) {
    auto reply = client.get("/v1/operations/" + op_id + "?wait=30");
    op = reply.json;
    auto state = op.value("state", "");
    if (reply.status != 200 || (state != "pending" && state != "running"))
      break;
  }
  if (op.value("state", "") != "succeeded") {
    ADD_FAILURE() << "create did not succeed: " << op.dump();
    return "";
  }
  std::string id = created.json.value("sandbox_id", "");
  created_.push_back(id);
  auto put = client.call("PUT", "/v1/sandboxes/" + id + "/files?path=/root/probe.py",
                         read_file(probe_source));
  EXPECT_EQ(put.status, 201) << put.body;
  return id;
}

std::string egress_e2e::run(const std::string& id, const std::string& cmd) {
  auto out = admin().run(id, cmd);
  return out.stdout_bytes + out.stderr_bytes;
}

std::string egress_e2e::probe(const std::string& id, const std::string& args) {
  return run(id, "python3 /root/probe.py " + args);
}

std::string egress_e2e::line_of(std::string text) {
  text.erase(text.find_last_not_of('\n') + 1);
  return text;
}

json egress_e2e::audit_find(const std::string& id, const std::string& kind,
                            const std::function<bool(const json&)>& match) {
  json found;
  wait_for(
    [&] {
      auto reply = admin().get("/v1/audit?sandbox_id=" + id + "&kind=" + kind + "&limit=1000");
      if (reply.status != 200 || !reply.json.contains("items"))
        return false;
      for (const auto& item : reply.json["items"])
        if (match(item)) {
          found = item;
          return true;
        }
      return false;
    },
    milliseconds(15'000), milliseconds(50));
  return found;
}

json egress_e2e::denied(const std::string& id, const std::string& kind,
                        const std::string& target_part, const std::string& reason_part) {
  return audit_find(id, kind, [&](const json& r) {
    return r.value("decision", "") == "denied"
           && r.value("target", "").find(target_part) != std::string::npos
           && r.value("reason", "").find(reason_part) != std::string::npos;
  });
}

/// Regular files under `root` (templates excepted: built before any secret
/// existed) that contain `needle`.
std::vector<std::string> files_containing(const std::string& root, const std::string& needle) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
         root, std::filesystem::directory_options::skip_permission_denied, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec)
      break;
    if (it->path().filename() == "templates" && it->is_directory(ec)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && !it->is_symlink(ec) && file_contains(it->path(), needle))
      found.push_back(it->path().string());
  }
  return found;
}

/// Host pids of the processes in sandbox `id`'s cgroup.
std::vector<int> sandbox_pids(const std::string& id) {
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (read_file(entry.path().string() + "/cgroup").find(id) != std::string::npos)
      pids.push_back(std::stoi(name));
  }
  return pids;
}

/// True when `needle` is in the environment or any readable mapping of `pid`.
bool process_holds(int pid, const std::string& needle) {
  std::string base = "/proc/" + std::to_string(pid);
  if (read_file(base + "/environ").find(needle) != std::string::npos)
    return true;
  std::ifstream maps(base + "/maps");
  int mem = ::open((base + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (mem < 0)
    return false;
  bool found = false;
  std::string line;
  while (!found && std::getline(maps, line)) {
    unsigned long begin = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) != 3 || perms[0] != 'r')
      continue;
    if (line.find("[vvar]") != std::string::npos)
      continue;
    std::string bytes(end - begin, '\0');
    ssize_t n = ::pread(mem, bytes.data(), bytes.size(), static_cast<off_t>(begin));
    if (n > 0 && bytes.substr(0, static_cast<size_t>(n)).find(needle) != std::string::npos)
      found = true;
  }
  ::close(mem);
  return found;
}

} // namespace airlock::test
