// The QMP client against a scripted peer on a socket pair: the greeting and
// negotiation, events skipped while a command waits, errors and a closed peer.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "schema/unique_fd.hpp"
#include "worker/microvm/qmp.hpp"

namespace airlock::worker::microvm {
namespace {

/// Reads one line the client sent.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n')
    line += c;
  return line;
}

void write_text(int fd, const std::string& text) {
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

const std::string greeting =
  R"({"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}})"
  "\n";

struct pair_fds {
  unique_fd client;
  unique_fd peer;
};

pair_fds make_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

TEST(qmp_client, negotiates_and_returns_a_commands_reply_skipping_events) {
  auto fds = make_pair();
  std::thread peer([fd = fds.peer.get()] {
    write_text(fd, greeting);
    EXPECT_EQ(read_line(fd), R"({"execute":"qmp_capabilities"})");
    write_text(fd, "{\"return\": {}}\n");
    EXPECT_EQ(read_line(fd), R"({"execute":"query-status"})");
    write_text(fd, R"({"event": "STOP", "timestamp": {"seconds": 1, "microseconds": 2}})"
                   "\n"
                   R"({"return": {"status": "paused", "singlestep": false, "running": false}})"
                   "\n");
  });
  auto client = qmp_client::open(std::move(fds.client), 2000);
  ASSERT_TRUE(client) << client.error().message;
  auto state = client->run_state(2000);
  peer.join();
  ASSERT_TRUE(state) << state.error().message;
  EXPECT_EQ(*state, "paused");
}

TEST(qmp_client, passes_arguments_and_turns_a_qmp_error_into_io_error) {
  auto fds = make_pair();
  std::thread peer([fd = fds.peer.get()] {
    write_text(fd, greeting);
    read_line(fd);
    write_text(fd, "{\"return\": {}}\n");
    EXPECT_EQ(read_line(fd), R"({"arguments":{"uri":"exec:cat"},"execute":"migrate"})");
    write_text(fd, R"({"error": {"class": "GenericError", "desc": "no migration here"}})"
                   "\n");
  });
  auto client = qmp_client::open(std::move(fds.client), 2000);
  ASSERT_TRUE(client) << client.error().message;
  auto migrated = client->execute("migrate", R"({"uri": "exec:cat"})", 2000);
  peer.join();
  ASSERT_FALSE(migrated);
  EXPECT_EQ(migrated.code(), errc::io_error);
  EXPECT_NE(migrated.error().message.find("no migration here"), std::string::npos);
  EXPECT_EQ(client->execute("x", "[1]", 100).code(), errc::invalid_argument);
}

TEST(qmp_client, refuses_a_peer_that_is_not_qmp_and_notices_a_closed_one) {
  auto fds = make_pair();
  write_text(fds.peer.get(), "SSH-2.0-OpenSSH\n");
  EXPECT_EQ(qmp_client::open(std::move(fds.client), 500).code(), errc::corrupt_record);

  auto silent = make_pair();
  EXPECT_EQ(qmp_client::open(std::move(silent.client), 100).code(), errc::timeout);

  auto closing = make_pair();
  closing.peer.reset();
  EXPECT_EQ(qmp_client::open(std::move(closing.client), 500).code(), errc::unavailable);
}

} // namespace
} // namespace airlock::worker::microvm
