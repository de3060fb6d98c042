// Directory watches through the node actor in a real sandbox: open, read
// (parked until a change), close; the bounds on watches per sandbox and on
// changes held for a reader that falls behind; a watch nobody reads expires
// and its inotify descriptor in the guest is closed.

#include "tests/support/wait.hpp"
#include "tests/worker/node_actor_fixture.hpp"

namespace airlock::worker::test {
namespace {

using actors::watch_batch;
using actors::watch_request;
using actors::watch_verb;

class node_watch_test : public node_actor_test {
protected:
  void adjust(worker_options& options) override {
    options.sandbox.watches_max = 2;
    options.sandbox.watch_changes_max = 8;
    options.sandbox.watch_idle_ms = 2000;
  }

  result<watch_batch> call(const std::string& id, watch_request request) {
    caf::scoped_actor self{*system_};
    return ask<watch_batch>(self, node_, timeout, actors::dp_watch_atom::value, id,
                            std::move(request));
  }

  result<watch_batch> open(const std::string& id, const std::string& path, bool recursive) {
    return call(id, watch_request{watch_verb::open, "", path, recursive, 0});
  }

  result<watch_batch> read(const std::string& id, const std::string& watch, uint32_t wait_ms) {
    return call(id, watch_request{watch_verb::read, watch, "", false, wait_ms});
  }

  void sh(const std::string& id, const std::string& line) {
    auto done = proc_wait(id, must_exec(id, shell(line)));
    ASSERT_EQ(done.exit_code, 0) << line;
  }

  /// inotify descriptors held by the sandbox's agent (PID 1).
  int agent_watches(const std::string& id) {
    auto out = text(id, must_exec(id, shell("n=0; for f in /proc/1/fd/*; do case $(readlink $f) "
                                            "in *inotify*) n=$((n+1));; esac; done; echo $n")));
    return out.empty() ? -1 : std::stoi(out);
  }
};

TEST_F(node_watch_test, a_read_waits_for_changes_and_a_closed_watch_is_gone) {
  ASSERT_NO_FATAL_FAILURE(must_create("sbwatch1"));
  sh("sbwatch1", "mkdir -p /data/w/sub");
  auto opened = open("sbwatch1", "/data/w", true);
  ASSERT_TRUE(opened) << opened.error().message;
  const auto watch = opened->watch_id;
  ASSERT_FALSE(watch.empty());
  auto quiet = read("sbwatch1", watch, 0);
  ASSERT_TRUE(quiet);
  EXPECT_TRUE(quiet->changes.empty());
  EXPECT_FALSE(quiet->ended);

  sh("sbwatch1", "echo x > /data/w/sub/f.txt");
  std::vector<schema::watch_change> seen;
  for (int round = 0; round < 20 && seen.empty(); ++round) {
    auto batch = read("sbwatch1", watch, 5000);
    ASSERT_TRUE(batch) << batch.error().message;
    seen.insert(seen.end(), batch->changes.begin(), batch->changes.end());
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), (schema::watch_change{"sub/f.txt", "create"}));

  auto closed = call("sbwatch1", watch_request{watch_verb::close, watch, "", false, 0});
  ASSERT_TRUE(closed);
  EXPECT_TRUE(closed->ended);
  EXPECT_EQ(read("sbwatch1", watch, 0).code(), errc::not_found);
  EXPECT_TRUE(call("sbwatch1", watch_request{watch_verb::close, watch, "", false, 0}))
    << "close is idempotent";
  EXPECT_EQ(open("sbwatch1", "/data/none", false).code(), errc::not_found);
  EXPECT_EQ(open("sbwatch1", "/data/w/sub/f.txt", false).code(), errc::invalid_argument);
}

TEST_F(node_watch_test, watches_per_sandbox_are_bounded) {
  ASSERT_NO_FATAL_FAILURE(must_create("sbwatch2"));
  sh("sbwatch2", "mkdir -p /data/w");
  auto a = open("sbwatch2", "/data/w", false);
  auto b = open("sbwatch2", "/data/w", false);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(open("sbwatch2", "/data/w", false).code(), errc::resource_exhausted);
  ASSERT_TRUE(call("sbwatch2", watch_request{watch_verb::close, a->watch_id, "", false, 0}));
  EXPECT_TRUE(open("sbwatch2", "/data/w", false)) << "a slot was freed";
}

TEST_F(node_watch_test, a_reader_that_falls_behind_loses_the_watch_not_memory) {
  ASSERT_NO_FATAL_FAILURE(must_create("sbwatch3"));
  sh("sbwatch3", "mkdir -p /data/w");
  auto opened = open("sbwatch3", "/data/w", false);
  ASSERT_TRUE(opened);
  sh("sbwatch3", "i=0; while [ $i -lt 20 ]; do : > /data/w/f$i; i=$((i+1)); done");
  size_t changes = 0;
  std::optional<watch_batch> last;
  for (int round = 0; round < 20 && !last; ++round) {
    auto batch = read("sbwatch3", opened->watch_id, 5000);
    ASSERT_TRUE(batch) << batch.error().message;
    changes += batch->changes.size();
    if (batch->ended)
      last = *batch;
  }
  ASSERT_TRUE(last) << "the watch ended";
  EXPECT_EQ(last->error_code, "resource_exhausted") << last->error_message;
  EXPECT_LE(changes, 8u) << "no more than watch_changes_max were held";
  EXPECT_EQ(read("sbwatch3", opened->watch_id, 0).code(), errc::not_found) << "then it is gone";
}

TEST_F(node_watch_test, a_watch_nobody_reads_expires_and_the_guest_stops_it) {
  ASSERT_NO_FATAL_FAILURE(must_create("sbwatch4"));
  sh("sbwatch4", "mkdir -p /data/w");
  const int before = agent_watches("sbwatch4");
  auto opened = open("sbwatch4", "/data/w", true);
  ASSERT_TRUE(opened);
  EXPECT_EQ(agent_watches("sbwatch4"), before + 1);
  EXPECT_TRUE(airlock::test::wait_for([&] { return agent_watches("sbwatch4") == before; },
                                      std::chrono::seconds(30), std::chrono::milliseconds(200)))
    << "watch_idle_ms without a call stops it in the guest";
  EXPECT_EQ(read("sbwatch4", opened->watch_id, 0).code(), errc::not_found);
}

} // namespace
} // namespace airlock::worker::test
