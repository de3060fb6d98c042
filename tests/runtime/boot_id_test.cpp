// Every namespace sandbox has its own boot id: a random UUID bind-mounted
// read-only over /proc/sys/kernel/random/boot_id, kept across pause and
// resume, new with every start, removed with the sandbox.

#include <filesystem>
#include <regex>
#include <string>

#include "sandbox_fixture.hpp"
#include "worker/runtime/state_file.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker::testing {
namespace {

namespace fs = std::filesystem;

using boot_id = runtime_test;

const std::regex uuid_v4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n");

std::string host_boot_id() {
  auto text = read_file("/proc/sys/kernel/random/boot_id");
  return text ? *text : std::string();
}

TEST(boot_id_format, random_boot_ids_are_lowercase_version_4_uuids_and_differ) {
  auto first = random_boot_id();
  auto second = random_boot_id();
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_TRUE(std::regex_match(*first, uuid_v4)) << *first;
  EXPECT_TRUE(std::regex_match(*second, uuid_v4)) << *second;
  EXPECT_NE(*first, *second);
}

TEST_F(boot_id, each_sandbox_reads_its_own_boot_id_and_not_the_hosts) {
  auto one = start_sandbox(unique_id("boot-one"));
  auto two = start_sandbox(unique_id("boot-two"));
  ASSERT_NE(one.runtime, nullptr);
  ASSERT_NE(two.runtime, nullptr);
  auto first = one.shell.run("cat /proc/sys/kernel/random/boot_id");
  auto other = two.shell.run("cat /proc/sys/kernel/random/boot_id");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(std::regex_match(first.output, uuid_v4)) << first.output;
  EXPECT_TRUE(std::regex_match(other.output, uuid_v4)) << other.output;
  EXPECT_NE(first.output, other.output);
  EXPECT_NE(first.output, host_boot_id());
  EXPECT_EQ(one.shell.run("cat /proc/sys/kernel/random/boot_id").output, first.output)
    << "read twice, the same";
  // What the sandbox reads is the file in its state directory.
  auto on_host = read_file(boot_id_path(state_->path(), one.handle.id));
  ASSERT_TRUE(on_host) << on_host.error().message;
  EXPECT_EQ(*on_host, first.output);
  // uuid is the kernel's own, a fresh one per read.
  EXPECT_NE(one.shell.run("cat /proc/sys/kernel/random/uuid").output,
            one.shell.run("cat /proc/sys/kernel/random/uuid").output);
}

TEST_F(boot_id, the_boot_id_survives_pause_and_resume_and_cannot_be_changed_from_inside) {
  auto box = start_sandbox(unique_id("boot-keep"));
  ASSERT_NE(box.runtime, nullptr);
  const std::string before = box.shell.run("cat /proc/sys/kernel/random/boot_id").output;
  ASSERT_TRUE(std::regex_match(before, uuid_v4)) << before;
  ASSERT_TRUE(runtime_->pause(box.handle.id));
  ASSERT_TRUE(runtime_->resume(box.handle.id));
  EXPECT_EQ(box.shell.run("cat /proc/sys/kernel/random/boot_id").output, before);
  auto write = box.shell.run("echo 00000000-0000-4000-8000-000000000000 > "
                             "/proc/sys/kernel/random/boot_id");
  EXPECT_NE(write.exit_code, 0) << "the boot id is read-only";
  EXPECT_NE(box.shell.run("umount /proc/sys/kernel/random/boot_id").exit_code, 0);
  EXPECT_NE(box.shell.run("mount -o remount,rw /proc/sys/kernel/random/boot_id").exit_code, 0);
  EXPECT_EQ(box.shell.run("cat /proc/sys/kernel/random/boot_id").output, before);
}

TEST_F(boot_id, a_new_start_of_the_same_id_is_a_new_boot_and_destroy_removes_the_file) {
  const std::string id = unique_id("boot-again");
  std::string first;
  {
    auto box = start_sandbox(id);
    ASSERT_NE(box.runtime, nullptr);
    first = box.shell.run("cat /proc/sys/kernel/random/boot_id").output;
    ASSERT_TRUE(fs::exists(boot_id_path(state_->path(), id)));
  } // destroyed, and checked
  EXPECT_FALSE(fs::exists(boot_id_path(state_->path(), id)));
  auto again = start_sandbox(id);
  ASSERT_NE(again.runtime, nullptr);
  auto second = again.shell.run("cat /proc/sys/kernel/random/boot_id").output;
  EXPECT_TRUE(std::regex_match(second, uuid_v4)) << second;
  EXPECT_NE(second, first);
}

} // namespace
} // namespace airlock::worker::testing
