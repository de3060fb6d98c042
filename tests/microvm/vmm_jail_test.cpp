// The VMM jail's mount plan, read as data: what QEMU's mount namespace holds.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "worker/microvm/qemu_command.hpp"
#include "worker/microvm/vmm_jail.hpp"

namespace airlock::worker::microvm {
namespace {

using k = mount_op::kind;

/// "kind target" of every step, e.g. "bind work/run/vm1.img".
std::vector<std::string> steps_of(const mount_plan& plan) {
  std::vector<std::string> out;
  for (const auto& op : plan.ops()) {
    std::string what;
    switch (op.what) {
      case k::make_private: what = "private"; break;
      case k::mount_fs: what = "mount"; break;
      case k::enter: what = "enter"; break;
      case k::bind: what = "bind"; break;
      case k::remount_ro: what = "ro"; break;
      case k::make_dir: what = "dir"; break;
      case k::make_file: what = "file"; break;
      case k::symlink: what = "link"; break;
      case k::pivot: what = "pivot"; break;
      default: what = "other"; break;
    }
    out.push_back(what + " " + (op.target ? op.target : ""));
  }
  return out;
}

bool has(const std::vector<std::string>& steps, const std::string& step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

size_t index_of(const std::vector<std::string>& steps, const std::string& step) {
  return static_cast<size_t>(std::find(steps.begin(), steps.end(), step) - steps.begin());
}

TEST(vmm_jail, binds_each_vm_file_at_its_own_path_on_an_empty_tmpfs_then_pivots) {
  vmm_jail_spec spec;
  spec.root_dir = "/data/run/vm1.jail";
  spec.read_only_files = {"/data/cache/vmlinux", "/data/cache/initramfs.cpio"};
  spec.writable_files = {"/data/run/vm1.img", "/data/run/vm1.console"};
  mount_plan plan;
  ASSERT_TRUE(build_vmm_jail_plan(spec, plan).is_ok());
  const auto steps = steps_of(plan);
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps.front(), "private ");
  EXPECT_EQ(steps[1], "mount /data/run/vm1.jail") << "a fresh tmpfs is the root";
  EXPECT_EQ(steps[2], "enter /data/run/vm1.jail");
  EXPECT_EQ(steps.back(), "pivot ");
  for (const auto* file : {"data/cache/vmlinux", "data/cache/initramfs.cpio", "data/run/vm1.img",
                           "data/run/vm1.console"}) {
    EXPECT_TRUE(has(steps, std::string("file ") + file)) << file;
    EXPECT_TRUE(has(steps, std::string("bind ") + file)) << file;
  }
  EXPECT_TRUE(has(steps, "ro data/cache/vmlinux")) << "what QEMU only reads is read-only";
  EXPECT_FALSE(has(steps, "ro data/run/vm1.img")) << "the disk is written";
  EXPECT_LT(index_of(steps, "dir data"), index_of(steps, "dir data/run"));
  EXPECT_EQ(std::count(steps.begin(), steps.end(), "dir data"), 1) << "each directory once";
  EXPECT_TRUE(has(steps, "bind usr"));
  EXPECT_TRUE(has(steps, "ro usr"));
  EXPECT_TRUE(has(steps, "mount proc")) << "a /proc of QEMU's own pid namespace";
  for (const auto* device : {"dev/null", "dev/urandom"})
    EXPECT_TRUE(has(steps, std::string("bind ") + device)) << device;
  EXPECT_FALSE(has(steps, "bind dev/kvm")) << "only under KVM";
  EXPECT_FALSE(has(steps, "bind home")) << "nothing else of the host";
}

TEST(vmm_jail, kvm_adds_its_device_and_files_under_usr_are_not_bound_twice) {
  vmm_jail_spec spec;
  spec.root_dir = "/run/vm2.jail";
  spec.read_only_files = {"/usr/share/qemu/qboot.rom"};
  spec.devices = {"/dev/kvm"};
  mount_plan plan;
  ASSERT_TRUE(build_vmm_jail_plan(spec, plan).is_ok());
  const auto steps = steps_of(plan);
  EXPECT_TRUE(has(steps, "bind dev/kvm"));
  EXPECT_FALSE(has(steps, "file usr/share/qemu/qboot.rom")) << "/usr is in the jail read-only";
}

TEST(vmm_jail, refuses_relative_paths_and_dot_dot) {
  for (const auto* bad : {"relative/file", "/data/../etc/shadow", "/", "", "/data//x"}) {
    vmm_jail_spec spec;
    spec.root_dir = "/run/vm3.jail";
    spec.writable_files = {bad};
    mount_plan plan;
    EXPECT_EQ(build_vmm_jail_plan(spec, plan).code, errc::invalid_argument) << bad;
  }
  vmm_jail_spec spec;
  spec.root_dir = "jail";
  mount_plan plan;
  EXPECT_EQ(build_vmm_jail_plan(spec, plan).code, errc::invalid_argument);
}

TEST(vmm_jail, the_files_of_a_vm_are_its_kernel_initramfs_firmware_disk_and_console) {
  vm_spec spec;
  spec.id = "vm1";
  spec.guest = {"/g/vmlinux", "/g/initramfs.cpio", "6.1"};
  spec.disk_path = "/r/vm1.img";
  spec.log_path = "/r/vm1.console";
  auto files = files_of(spec, "/q/qboot.rom");
  EXPECT_EQ(files.read_only,
            (std::vector<std::string>{"/g/vmlinux", "/g/initramfs.cpio", "/q/qboot.rom"}));
  EXPECT_EQ(files.writable, (std::vector<std::string>{"/r/vm1.img", "/r/vm1.console"}));
  spec.disk_path.clear();
  spec.log_path.clear();
  EXPECT_TRUE(files_of(spec, "").writable.empty()) << "the probe has no disk and no console";
}

} // namespace
} // namespace airlock::worker::microvm
