// Write sessions through the node actor to a real sandbox: a file written in
// parts appears only at the commit, with exactly the bytes sent, and an
// aborted or expired session leaves the old file and no temporary file;
// sessions are bounded in number.

#include "tests/support/wait.hpp"
#include "tests/worker/node_actor_fixture.hpp"

namespace airlock::worker::test {
namespace {

/// Sessions with the default idle time (60 s): none expires during a test.
class node_write_session_test : public node_actor_test {
protected:
  static std::string pattern(size_t size, uint64_t seed) {
    std::string out(size, '\0');
    for (auto& c : out) {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      c = static_cast<char>(seed);
    }
    return out;
  }

  result<uint64_t> open(const std::string& id, const std::string& path) {
    auto opened = file(id, fspec(file_verb::write_open, path));
    if (!opened)
      return opened.error();
    return opened->session;
  }

  result<file_result> part(const std::string& id, uint64_t session, uint64_t offset,
                           std::string data) {
    auto spec = fspec(file_verb::write_part, "");
    spec.session = session;
    spec.offset = offset;
    spec.data = std::move(data);
    return file(id, std::move(spec));
  }

  result<file_result> end(const std::string& id, file_verb verb, uint64_t session) {
    auto spec = fspec(verb, "");
    spec.session = session;
    return file(id, std::move(spec));
  }

  /// The names in /data, in order ("" when it cannot be listed).
  std::string names(const std::string& id) {
    auto listed = file(id, fspec(file_verb::list, "/data"));
    if (!listed)
      return "";
    std::string out;
    for (const auto& entry : listed->entries)
      out += entry.name + " ";
    return out;
  }

  /// Creates the sandbox with /data/f.bin holding "old".
  void create_with_old_file(const std::string& id) {
    must_create(id);
    auto write = fspec(file_verb::write, "/data/f.bin");
    write.data = "old";
    ASSERT_TRUE(file(id, write));
    ASSERT_EQ(names(id), "f.bin ");
  }
};

TEST_F(node_write_session_test, a_commit_makes_the_file_appear_with_exactly_the_parts_sent) {
  create_with_old_file("nd-wsess");
  const std::string content = pattern(3 * 700'000 + 11, 0x9e3779b97f4a7c15ULL);
  auto session = open("nd-wsess", "/data/f.bin");
  ASSERT_TRUE(session) << session.error().message;
  uint64_t offset = 0;
  for (size_t at = 0; at < content.size(); at += 700'000) {
    auto piece = content.substr(at, 700'000);
    auto taken = part("nd-wsess", *session, offset, piece);
    ASSERT_TRUE(taken) << taken.error().message;
    offset += piece.size();
    EXPECT_EQ(taken->written, offset);
  }
  // Until the commit the old file stands, beside the temporary one.
  auto before = file("nd-wsess", fspec(file_verb::read, "/data/f.bin"));
  ASSERT_TRUE(before);
  EXPECT_EQ(before->data, "old");
  auto listed = file("nd-wsess", fspec(file_verb::list, "/data"));
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->entries.size(), 2u) << names("nd-wsess");
  // A part out of order is refused; the session goes on.
  EXPECT_EQ(part("nd-wsess", *session, 5, "x").code(), errc::invalid_argument);
  auto committed = end("nd-wsess", file_verb::write_commit, *session);
  ASSERT_TRUE(committed) << committed.error().message;
  EXPECT_EQ(committed->written, content.size());
  auto after = file("nd-wsess", fspec(file_verb::read, "/data/f.bin"));
  ASSERT_TRUE(after) << after.error().message;
  ASSERT_EQ(after->data.size(), content.size());
  EXPECT_TRUE(after->data == content) << "the committed file differs from the parts";
  EXPECT_EQ(names("nd-wsess"), "f.bin ");
  // The session is over.
  EXPECT_EQ(part("nd-wsess", *session, offset, "x").code(), errc::not_found);
}

TEST_F(node_write_session_test, an_abort_leaves_the_old_file_and_no_temporary_file) {
  create_with_old_file("nd-wabort");
  auto aborted = open("nd-wabort", "/data/f.bin");
  ASSERT_TRUE(aborted) << aborted.error().message;
  ASSERT_TRUE(part("nd-wabort", *aborted, 0, pattern(100'000, 7)));
  EXPECT_NE(names("nd-wabort"), "f.bin ") << "the temporary file is expected beside f.bin";
  ASSERT_TRUE(end("nd-wabort", file_verb::write_abort, *aborted));
  EXPECT_EQ(names("nd-wabort"), "f.bin ");
  // Idempotent: a second abort finds nothing to do.
  EXPECT_TRUE(end("nd-wabort", file_verb::write_abort, *aborted));
  EXPECT_EQ(end("nd-wabort", file_verb::write_commit, *aborted).code(), errc::not_found);

  auto kept = file("nd-wabort", fspec(file_verb::read, "/data/f.bin"));
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->data, "old");
}

/// Sessions that expire after 3 s without a call (long enough for the calls
/// before the expiry on a loaded host, short enough to wait for).
class node_write_expiry_test : public node_write_session_test {
protected:
  void adjust(worker_options& options) override { options.sandbox.write_session_idle_ms = 3000; }
};

TEST_F(node_write_expiry_test, an_idle_session_expires_leaving_the_old_file_and_no_temporary_file) {
  create_with_old_file("nd-wexpire");
  // A client that goes away: nobody calls again, and the session expires.
  auto abandoned = open("nd-wexpire", "/data/f.bin");
  ASSERT_TRUE(abandoned) << abandoned.error().message;
  ASSERT_TRUE(part("nd-wexpire", *abandoned, 0, pattern(100'000, 8)));
  EXPECT_TRUE(airlock::test::wait_for([&] { return names("nd-wexpire") == "f.bin "; },
                                      airlock::test::wait_max));
  EXPECT_EQ(part("nd-wexpire", *abandoned, 100'000, "x").code(), errc::not_found);
  auto kept = file("nd-wexpire", fspec(file_verb::read, "/data/f.bin"));
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->data, "old");
}

TEST_F(node_write_session_test, sessions_are_bounded_and_a_refused_path_fails_at_the_open) {
  must_create("nd-wlimit");
  std::vector<uint64_t> sessions;
  for (size_t i = 0; i < sandbox_actor_options{}.write_sessions_max; ++i) {
    auto opened = open("nd-wlimit", "/data/f" + std::to_string(i));
    ASSERT_TRUE(opened) << opened.error().message;
    sessions.push_back(*opened);
  }
  EXPECT_EQ(open("nd-wlimit", "/data/one-too-many").code(), errc::resource_exhausted);
  ASSERT_TRUE(end("nd-wlimit", file_verb::write_abort, sessions.back()));
  auto room = open("nd-wlimit", "/data/now-there-is-room");
  ASSERT_TRUE(room) << room.error().message;
  ASSERT_TRUE(end("nd-wlimit", file_verb::write_abort, *room));
  // A directory cannot be written over: refused before any part is sent.
  ASSERT_TRUE(file("nd-wlimit", fspec(file_verb::mkdir, "/data/dir")));
  EXPECT_EQ(open("nd-wlimit", "/data/dir").code(), errc::invalid_argument);
}

} // namespace
} // namespace airlock::worker::test
