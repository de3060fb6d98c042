#include "tests/worker/worker_fixture.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "tests/rootfs/test_support.hpp"
#include "tests/support/environment.hpp"
#include "worker/rootfs/templates.hpp"
#include "worker/runtime/cgroup_driver.hpp"

namespace airlock::worker::test {

std::string worker_skip_reason() {
  if (auto missing = airlock::test::root_missing(
        "the worker creates namespaces, cgroups, veths and btrfs subvolumes"))
    return *missing;
  for (const char* tool : {"/bin/busybox", "/sbin/ip", "/usr/sbin/nft"})
    if (::access(tool, X_OK) != 0)
      return std::string(tool) + " is missing (busybox-static, iproute2, nftables)";
  if (auto driver = detect_cgroup_driver({}); !driver)
    return "no usable cgroups: " + driver.error().message;
  if (auto reason = btrfs_unavailable_reason())
    return *reason;
  if (::access(AIRLOCK_GUEST_BINARY, X_OK) != 0)
    return std::string("build target airlock-guest first (") + AIRLOCK_GUEST_BINARY + ")";
  return {};
}

namespace_runtime_options worker_runtime_options(const std::string& state_dir) {
  namespace_runtime_options options;
  options.state_dir = state_dir;
  options.cgroups.parent = "airlock-wtest";
  options.net.nft_table = "airlock_wtest";
  options.net.interface_prefix = "aw";
  options.address_pool = "10.201.0.0/16";
  options.id_range_base = 300000000;
  options.slots_max = 128;
  return options;
}

result<worker_host> worker_host::open(const std::string& data_dir, bool build_minimal) {
  worker_host host;
  host.data_dir = data_dir;
  auto runtime = namespace_runtime::open(worker_runtime_options(data_dir + "/runtime"));
  if (!runtime)
    return runtime.error();
  host.runtime = std::shared_ptr<namespace_runtime>(std::move(*runtime));
  auto store = storage::open_rocksdb_store(data_dir + "/store");
  if (!store)
    return store.error();
  host.store = std::shared_ptr<storage::kv_store>(std::move(*store));
  rootfs_options rootfs;
  rootfs.data_dir = data_dir;
  rootfs.kind = rootfs_kind::btrfs;
  rootfs.image_size_mb = 4096;
  rootfs.disk_quota = false;
  auto driver = make_rootfs_driver(rootfs);
  if (!driver)
    return driver.error();
  host.rootfs = std::shared_ptr<rootfs_driver>(std::move(*driver));
  if (!build_minimal)
    return host;
  template_options templates;
  template_builder builder(*host.rootfs, templates);
  if (auto built = builder.ensure("minimal"); !built)
    return built.error();
  return host;
}

worker_context worker_host::context(worker_options options) const {
  auto guest = open_guest_binary(AIRLOCK_GUEST_BINARY);
  EXPECT_TRUE(guest) << guest.error().message;
  worker_context context;
  context.runtime = runtime;
  context.rootfs = rootfs;
  context.store = store;
  context.options = std::move(options);
  context.guest = guest ? *guest : nullptr;
  return context;
}

void real_worker_test::open_host(bool build_minimal) {
  lock_fd_ = ::open("/run/airlock-worker-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(lock_fd_, 0);
  ASSERT_EQ(::flock(lock_fd_, LOCK_EX), 0);
  scratch_ = std::make_unique<scratch_dir>();
  auto opened = worker_host::open(scratch_->path().string(), build_minimal);
  ASSERT_TRUE(opened) << opened.error().message;
  host_ = std::move(*opened);
  config_ = std::make_unique<actors::system_config>();
  system_ = std::make_unique<caf::actor_system>(*config_);
}

void real_worker_test::close_host() {
  if (!scratch_) {
    release_lock();
    return;
  }
  stop(worker_);
  worker_ = spawn_worker(*system_, host_.context());
  {
    caf::scoped_actor self{*system_};
    auto report =
      ask<recover_report>(self, worker_, std::chrono::seconds(60), wk_recover_atom::value);
    EXPECT_TRUE(report && report->failures.empty());
  }
  stop(worker_);
  worker_ = worker_actor{};
  system_.reset();
  config_.reset();
  if (host_.rootfs)
    (void)host_.rootfs->detach();
  host_ = {};
  scratch_.reset();
  (void)std::system("/usr/sbin/nft delete table inet airlock_wtest 2>/dev/null");
  // The (now empty) cgroup parents of the test runtime, v1 and v2.
  std::error_code ignored;
  for (const auto& hierarchy : std::filesystem::directory_iterator("/sys/fs/cgroup", ignored))
    ::rmdir((hierarchy.path() / "airlock-wtest").c_str());
  release_lock();
}

void real_worker_test::release_lock() {
  if (lock_fd_ >= 0)
    ::close(lock_fd_); // closing drops the flock
  lock_fd_ = -1;
}

} // namespace airlock::worker::test
