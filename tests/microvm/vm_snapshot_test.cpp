// The VM snapshot record: its format and what must match to restore it.

#include <gtest/gtest.h>

#include "worker/microvm/vm_snapshot.hpp"

namespace airlock::worker::microvm {
namespace {

vm_snapshot_record sample() {
  vm_snapshot_record r;
  r.source_id = "sb1";
  r.created_unix_ms = 1'780'000'000'000;
  r.qemu_version = "7.2.19 (Debian 1:7.2+dfsg-7+deb12u18)";
  r.machine = "microvm,x-option-roms=off,memory-backend=mem";
  r.accel = "tcg";
  r.cpu = "max";
  r.memory_mb = 256;
  r.vcpus = 1;
  r.kernel_sha256 = std::string(64, 'a');
  r.initrd_sha256 = std::string(64, 'b');
  r.guest_release = "6.1.0-57-amd64";
  return r;
}

TEST(vm_snapshot_record, round_trips_with_relative_file_names) {
  auto parsed = vm_snapshot_record_from_json(to_json(sample()));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->qemu_version, sample().qemu_version);
  EXPECT_EQ(parsed->machine, sample().machine);
  EXPECT_EQ(parsed->memory_mb, 256u);
  EXPECT_EQ(parsed->created_unix_ms, sample().created_unix_ms);
  EXPECT_EQ(parsed->state_file, "state");
  EXPECT_EQ(parsed->memory_file, "memory");
  EXPECT_EQ(parsed->disk_file, "disk.ext4");
  EXPECT_FALSE(parsed->network);
  EXPECT_TRUE(check_restorable(*parsed, sample()).is_ok());
  auto wired = sample();
  wired.network = true;
  auto with_nic = vm_snapshot_record_from_json(to_json(wired));
  ASSERT_TRUE(with_nic) << with_nic.error().message;
  EXPECT_TRUE(with_nic->network);
  auto streamed = sample();
  streamed.memory_file = "";
  auto in_state = vm_snapshot_record_from_json(to_json(streamed));
  ASSERT_TRUE(in_state) << in_state.error().message;
  EXPECT_EQ(in_state->memory_file, "") << "RAM in the state stream";
}

TEST(vm_snapshot_record, refuses_other_versions_garbage_and_paths_out_of_the_directory) {
  auto text = to_json(sample());
  auto newer = text;
  newer.replace(newer.find("\"format_version\": 1"), 19, "\"format_version\": 2");
  EXPECT_EQ(vm_snapshot_record_from_json(newer).code(), errc::unsupported_version);
  EXPECT_EQ(vm_snapshot_record_from_json("{}").code(), errc::corrupt_record);
  auto escaping = sample();
  escaping.memory_file = "../elsewhere";
  EXPECT_EQ(vm_snapshot_record_from_json(to_json(escaping)).code(), errc::invalid_argument);
  auto no_state = sample();
  no_state.state_file = "";
  EXPECT_EQ(vm_snapshot_record_from_json(to_json(no_state)).code(), errc::invalid_argument);
}

TEST(vm_snapshot_record, a_different_host_is_refused_naming_what_differs) {
  auto here = sample();
  here.qemu_version = "8.2.0";
  auto refused = check_restorable(sample(), here);
  EXPECT_EQ(refused.code, errc::wrong_state);
  EXPECT_NE(refused.message.find("QEMU"), std::string::npos) << refused.message;
  here = sample();
  here.initrd_sha256 = std::string(64, 'c');
  EXPECT_NE(check_restorable(sample(), here).message.find("initramfs"), std::string::npos);
  here = sample();
  here.accel = "kvm";
  EXPECT_NE(check_restorable(sample(), here).message.find("accelerator"), std::string::npos);
}

} // namespace
} // namespace airlock::worker::microvm
