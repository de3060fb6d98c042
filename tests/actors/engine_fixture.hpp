#pragma once
// A deterministic harness for the operation engine: CAF's test scheduler (no
// threads, time moves only when a test says so), an in-memory store, a
// journal whose acknowledgements the test can hold back, and a scripted step
// runner.

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "actors/clock.hpp"
#include "actors/messages.hpp"
#include "actors/operation_engine.hpp"
#include "actors/system_config.hpp"
#include "storage/commit_journal.hpp"
#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"

namespace airlock::testing {

using release_atom = caf::atom_constant<caf::atom("release")>;

/// A journal that writes to the store and acknowledges at once, unless the
/// test holds acknowledgements back or makes writes fail.
class gated_journal final : public storage::commit_journal {
public:
  explicit gated_journal(storage::kv_store& store) : store_(store) {}

  void submit(storage::write_batch batch, storage::commit_callback done) override {
    ++submitted;
    if (failures_left > 0) {
      --failures_left;
      done(make_status(errc::io_error, "injected write failure"));
      return;
    }
    if (hold) {
      held_.emplace_back(std::move(batch), std::move(done));
      return;
    }
    done(store_.write(batch));
  }

  /// Writes and acknowledges everything held back, in order.
  size_t release() {
    auto count = held_.size();
    while (!held_.empty()) {
      auto [batch, done] = std::move(held_.front());
      held_.pop_front();
      done(store_.write(batch));
    }
    return count;
  }

  /// Drops everything held back, as a crash before the sync would.
  void drop() { held_.clear(); }

  bool hold = false;
  int failures_left = 0;
  size_t submitted = 0;

private:
  storage::kv_store& store_;
  std::deque<std::pair<storage::write_batch, storage::commit_callback>> held_;
};

/// What the scripted runner saw and how it answers.
struct runner_script {
  struct call {
    bool check;
    actors::step_request request;
  };
  std::vector<call> calls;
  /// Decides each answer; nullopt: hold the answer until released.
  std::function<std::optional<actors::step_outcome>(bool check, const actors::step_request&)>
    answer = [](bool, const actors::step_request&) {
      return std::optional<actors::step_outcome>{actors::step_outcome::complete()};
    };
  size_t runs() const {
    size_t n = 0;
    for (const auto& c : calls)
      n += c.check ? 0 : 1;
    return n;
  }
  size_t checks() const { return calls.size() - runs(); }
};

/// Spawns a step runner that follows `script`; (release_atom, outcome) answers
/// the oldest held call.
actors::step_runner_actor spawn_scripted_runner(caf::actor_system& system,
                                                std::shared_ptr<runner_script> script);

class engine_fixture : public ::testing::Test {
protected:
  engine_fixture();
  ~engine_fixture() override;

  /// Spawns the engine with kind "test.op" (and any extra procedures).
  void start_engine(actors::procedure_table extra = {});

  /// Runs every queued message (no time passes).
  void run() { sched.run(); }

  /// Moves both the wall clock and the actor clock, firing due timers.
  void advance_ms(int64_t ms);

  /// Sends a request from a fresh scoped actor, runs the system and returns
  /// the reply, or an error if there was none (yet).
  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& dest, Ts&&... xs) {
    auto asker = std::make_unique<caf::scoped_actor>(system);
    auto handle = (*asker)->request(dest, caf::infinite, std::forward<Ts>(xs)...);
    run();
    if ((*asker)->mailbox().empty())
      return caf::make_error(caf::sec::request_timeout);
    caf::expected<T> result{caf::make_error(caf::sec::unexpected_response)};
    handle.receive([&result](T& value) { result = std::move(value); },
                   [&result](caf::error& err) { result = std::move(err); });
    return result;
  }

  /// A request left pending: returns the asker so the test can read it later.
  template <class Handle, class... Ts>
  std::unique_ptr<caf::scoped_actor> send_request(const Handle& dest, Ts&&... xs) {
    auto asker = std::make_unique<caf::scoped_actor>(system);
    (*asker)->send(dest, std::forward<Ts>(xs)...);
    return asker;
  }

  caf::expected<actors::create_reply> create(std::string key = {}, std::string params = "{}",
                                             std::string tenant = "t1");
  schema::operation_record stored(const std::string& id);
  schema::operation_record get(const std::string& id);

  std::unique_ptr<storage::kv_store> store = storage::make_memory_store();
  gated_journal journal{*store};
  manual_wall_clock clock;
  seeded_entropy entropy{7};
  actors::system_config config;
  caf::actor_system system;
  caf::scheduler::test_coordinator& sched;
  std::shared_ptr<runner_script> script = std::make_shared<runner_script>();
  actors::operation_engine_options options;
  actors::operation_engine_actor engine;
  actors::step_runner_actor runner;

  const actors::step_runner_actor& script_runner() const { return runner; }
};

} // namespace airlock::testing
