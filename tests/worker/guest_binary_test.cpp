// The guest agent every sandbox runs is one host file opened by the worker:
// a missing, non-executable or non-regular file is refused at start with a
// message that says what to do.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "tests/support/host.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::test {
namespace {

TEST(guest_binary, an_executable_file_opens_and_anything_else_is_refused_clearly) {
  temp_dir dir("airlock-guest-binary");
  const std::string agent = dir.path() + "/airlock-guest";
  ASSERT_TRUE(worker::write_file(agent,
                                 "\x7f"
                                 "ELF",
                                 0755));
  auto opened = worker::open_guest_binary(agent);
  ASSERT_TRUE(opened) << opened.error().message;
  ASSERT_TRUE(*opened);
  EXPECT_GE((*opened)->get(), 0);

  auto missing = worker::open_guest_binary(dir.path() + "/not-built");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, errc::not_found);
  EXPECT_NE(missing.error().message.find("build airlock-guest"), std::string::npos)
    << missing.error().message;

  ASSERT_EQ(::chmod(agent.c_str(), 0750), 0);
  auto private_file = worker::open_guest_binary(agent);
  ASSERT_FALSE(private_file);
  EXPECT_EQ(private_file.error().code, errc::invalid_argument);
  EXPECT_NE(private_file.error().message.find("o+x"), std::string::npos);

  auto directory = worker::open_guest_binary(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().code, errc::invalid_argument);
}

} // namespace
} // namespace airlock::test
