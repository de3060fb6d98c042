// The microVM's QEMU command line, read as data.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "worker/microvm/qemu_command.hpp"

namespace airlock::worker::microvm {
namespace {

/// The argument after `flag` (each occurrence), in order.
std::vector<std::string> values_of(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag)
      out.push_back(argv[i + 1]);
  return out;
}

vm_spec sample_spec() {
  vm_spec spec;
  spec.id = "vm1";
  spec.guest = {"/g/vmlinux", "/g/initramfs.cpio", "6.1.0-57-amd64"};
  spec.tsc_khz = 2'000'000;
  return spec;
}

TEST(qemu_command, boots_microvm_with_acpi_and_the_guest_kernel_under_tcg) {
  auto argv = qemu_argv(sample_spec(), "/usr/bin/qemu-system-x86_64", "/q/qboot.rom");
  EXPECT_EQ(argv.front(), "/usr/bin/qemu-system-x86_64");
  ASSERT_EQ(values_of(argv, "-M").size(), 1u);
  EXPECT_EQ(values_of(argv, "-M")[0].find("acpi=off"), std::string::npos);
  EXPECT_EQ(values_of(argv, "-M")[0].rfind("microvm", 0), 0u);
  EXPECT_EQ(values_of(argv, "-accel"), std::vector<std::string>{"tcg"});
  EXPECT_EQ(values_of(argv, "-kernel"), std::vector<std::string>{"/g/vmlinux"});
  EXPECT_EQ(values_of(argv, "-initrd"), std::vector<std::string>{"/g/initramfs.cpio"});
  EXPECT_EQ(values_of(argv, "-bios"), std::vector<std::string>{"/q/qboot.rom"});
  EXPECT_NE(std::find(argv.begin(), argv.end(), "-no-reboot"), argv.end());
  EXPECT_NE(values_of(argv, "-append")[0].find("tsc_early_khz=2000000"), std::string::npos);
  EXPECT_TRUE(values_of(argv, "-drive").empty());
  EXPECT_EQ(values_of(argv, "-append")[0].find("airlock.net"), std::string::npos);
  EXPECT_TRUE(values_of(argv, "-netdev").empty());
}

TEST(qemu_command, a_nic_is_a_tap_descriptor_and_its_addresses_go_to_the_guest) {
  auto with_nic = sample_spec();
  with_nic.network = {"10.200.0.6/30", "10.200.0.5", vm_mac_address("box"), 9};
  auto argv = qemu_argv(with_nic, "q", "f");
  EXPECT_NE(values_of(argv, "-append")[0].find(" airlock.net=10.200.0.6/30,10.200.0.5"),
            std::string::npos);
  EXPECT_EQ(values_of(argv, "-netdev"), std::vector<std::string>{"tap,id=net0,vhost=off,fd=5"});
  auto devices = values_of(argv, "-device");
  EXPECT_NE(std::find(devices.begin(), devices.end(),
                      "virtio-net-device,netdev=net0,mac=" + vm_mac_address("box")),
            devices.end());
}

TEST(qemu_command, the_mac_is_locally_administered_unicast_and_stable_per_id) {
  const std::string mac = vm_mac_address("sandbox-1");
  ASSERT_EQ(mac.size(), 17u);
  EXPECT_EQ(mac.substr(0, 3), "02:");
  EXPECT_EQ(mac, vm_mac_address("sandbox-1"));
  EXPECT_NE(mac, vm_mac_address("sandbox-2"));
}

TEST(qemu_command, passes_the_channel_and_qmp_as_inherited_descriptors) {
  auto argv = qemu_argv(sample_spec(), "qemu", "fw");
  auto chardevs = values_of(argv, "-chardev");
  EXPECT_NE(std::find(chardevs.begin(), chardevs.end(), "socket,id=channel,fd=3"), chardevs.end());
  EXPECT_NE(std::find(chardevs.begin(), chardevs.end(), "socket,id=qmp,server=on,wait=off,fd=4"),
            chardevs.end());
  auto devices = values_of(argv, "-device");
  EXPECT_NE(std::find(devices.begin(), devices.end(),
                      "virtserialport,chardev=channel,name=airlock.channel"),
            devices.end());
  EXPECT_EQ(values_of(argv, "-mon"), std::vector<std::string>{"chardev=qmp,mode=control"});
}

TEST(qemu_command, attaches_the_root_disk_only_when_given) {
  auto spec = sample_spec();
  spec.disk_path = "/d/sandbox.ext4";
  auto argv = qemu_argv(spec, "qemu", "fw");
  ASSERT_EQ(values_of(argv, "-drive").size(), 1u);
  EXPECT_NE(values_of(argv, "-drive")[0].find("file=/d/sandbox.ext4"), std::string::npos);
  auto devices = values_of(argv, "-device");
  EXPECT_NE(std::find(devices.begin(), devices.end(), "virtio-blk-device,drive=root"),
            devices.end());
}

TEST(qemu_command, kvm_uses_the_host_cpu_and_no_tsc_hint) {
  auto spec = sample_spec();
  spec.accel = accelerator::kvm;
  auto argv = qemu_argv(spec, "qemu", "fw");
  EXPECT_EQ(values_of(argv, "-accel"), std::vector<std::string>{"kvm"});
  EXPECT_EQ(values_of(argv, "-cpu"), std::vector<std::string>{"host,-arch-capabilities"});
  EXPECT_EQ(values_of(argv, "-append")[0].find("tsc_early_khz"), std::string::npos);
}

TEST(qemu_command, turns_on_qemus_seccomp_sandbox_unless_told_not_to) {
  auto argv = qemu_argv(sample_spec(), "qemu", "fw");
  ASSERT_EQ(values_of(argv, "-sandbox").size(), 1u);
  EXPECT_EQ(values_of(argv, "-sandbox")[0].rfind("on,", 0), 0u);
  for (const char* denied :
       {"obsolete=deny", "elevateprivileges=deny", "spawn=deny", "resourcecontrol=deny"})
    EXPECT_NE(values_of(argv, "-sandbox")[0].find(denied), std::string::npos) << denied;
  EXPECT_TRUE(values_of(qemu_argv(sample_spec(), "qemu", "fw", false), "-sandbox").empty());
}

TEST(qemu_command, anonymous_ram_has_no_memory_backend_and_no_incoming) {
  auto argv = qemu_argv(sample_spec(), "qemu", "fw");
  EXPECT_TRUE(values_of(argv, "-object").empty());
  EXPECT_TRUE(values_of(argv, "-incoming").empty());
  EXPECT_EQ(values_of(argv, "-M")[0].find("memory-backend"), std::string::npos);
}

TEST(qemu_command, ram_in_a_shared_file_backs_the_machine) {
  auto spec = sample_spec();
  spec.memory_mb = 512;
  spec.memory_path = "/run/vm1.ram";
  auto argv = qemu_argv(spec, "qemu", "fw");
  EXPECT_EQ(values_of(argv, "-object"),
            std::vector<std::string>{
              "memory-backend-file,id=mem,size=512M,mem-path=/run/vm1.ram,share=on"});
  EXPECT_EQ(values_of(argv, "-M"),
            std::vector<std::string>{"microvm,x-option-roms=off,memory-backend=mem"});
  EXPECT_EQ(values_of(argv, "-m"), std::vector<std::string>{"512"});
  EXPECT_EQ(machine_argument(spec), values_of(argv, "-M")[0]);
}

TEST(qemu_command, a_clone_maps_its_base_private_and_waits_for_the_state) {
  auto spec = sample_spec();
  spec.memory_path = "/snap/memory";
  spec.memory_shared = false;
  spec.incoming = true;
  auto argv = qemu_argv(spec, "qemu", "fw");
  ASSERT_EQ(values_of(argv, "-object").size(), 1u);
  EXPECT_NE(values_of(argv, "-object")[0].find(",share=off"), std::string::npos);
  EXPECT_EQ(values_of(argv, "-incoming"), std::vector<std::string>{"defer"});
  // The device line is the booted VM's: a migration stream finds its devices again.
  auto booted = sample_spec();
  booted.memory_path = "/run/vm1.ram";
  auto booted_argv = qemu_argv(booted, "qemu", "fw");
  EXPECT_EQ(values_of(argv, "-device"), values_of(booted_argv, "-device"));
  EXPECT_EQ(values_of(argv, "-M"), values_of(booted_argv, "-M"));
}

TEST(qemu_command, a_hotplugged_channel_leaves_the_port_off_the_command_line) {
  auto spec = sample_spec();
  spec.channel_hotplug = true;
  auto argv = qemu_argv(spec, "qemu", "fw");
  auto chardevs = values_of(argv, "-chardev");
  EXPECT_EQ(std::find(chardevs.begin(), chardevs.end(), "socket,id=channel,fd=3"), chardevs.end());
  auto devices = values_of(argv, "-device");
  EXPECT_NE(std::find(devices.begin(), devices.end(), "virtio-serial-device"), devices.end());
  for (const auto& device : devices)
    EXPECT_EQ(device.find("virtserialport"), std::string::npos) << device;
}

TEST(qemu_command, measures_a_plausible_tsc_rate) {
  auto khz = measure_tsc_khz();
  EXPECT_GT(khz, 100'000u); // above 100 MHz
  EXPECT_LT(khz, 10'000'000u);
}

} // namespace
} // namespace airlock::worker::microvm
