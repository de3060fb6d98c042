// The child process of the durability test: runs the real operation engine on
// a real RocksDB store with the group-commit journal, and prints a line for
// every acknowledged fact. The parent kills it with SIGKILL at random points
// and checks that every printed fact survived.
//
//   durability_writer STATE_DIR EFFECTS_DIR BATCH OPS STEPS
//
// Recovers every unfinished operation, creates OPS operations with the
// idempotency keys "BATCH-0".."BATCH-(OPS-1)" (BATCH "-" creates none), and
// exits 0 once every operation it knows of has ended. Lines:
//   created KEY ID        the create was acknowledged (durable)
//   state ID SEQUENCE STATE   a transition was acknowledged (durable)
//   done                  every known operation ended

#include <caf/all.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "actors/clock.hpp"
#include "actors/operation_engine.hpp"
#include "actors/system_config.hpp"
#include "storage/commit_journal.hpp"
#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"

namespace {

using namespace airlock;

constexpr const char* kind = "durable.op";

struct step_config {
  std::string effects_dir;
  uint32_t steps = 3;
};

std::string effect_path(const step_config& config, const actors::step_request& r) {
  return config.effects_dir + "/" + r.operation_id + "-" + std::to_string(r.step);
}

/// The effect of a step: a file that exists once the step took effect. The
/// run is idempotent (an existing file counts as done), so reconcile can tell.
actors::step_outcome after_effect(const step_config& config, const actors::step_request& r) {
  if (r.step + 1 >= config.steps)
    return actors::step_outcome::complete(R"({"steps":)" + std::to_string(config.steps) + "}");
  return actors::step_outcome::advance(std::to_string(r.step + 1));
}

actors::step_runner_actor::behavior_type file_runner(actors::step_runner_actor::pointer,
                                                     step_config config) {
  return {
    [config](actors::step_run_atom, const actors::step_request& r) -> actors::step_outcome {
      auto path = effect_path(config, r);
      int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0)
        return actors::step_outcome::unknown();
      bool synced = ::fsync(fd) == 0;
      ::close(fd);
      return synced ? after_effect(config, r) : actors::step_outcome::unknown();
    },
    [config](actors::step_check_atom, const actors::step_request& r) -> actors::step_outcome {
      struct stat st {};
      if (::stat(effect_path(config, r).c_str(), &st) == 0)
        return after_effect(config, r);
      return actors::step_outcome::not_done();
    },
  };
}

void print_state(const schema::operation_record& r) {
  std::printf("state %s %llu %s\n", r.id.c_str(), static_cast<unsigned long long>(r.sequence),
              std::string(schema::to_string(r.state)).c_str());
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: durability_writer STATE_DIR EFFECTS_DIR BATCH OPS STEPS\n");
    return 2;
  }
  std::string batch = argv[3];
  auto ops = std::stoul(argv[4]);
  step_config steps{argv[2], static_cast<uint32_t>(std::stoul(argv[5]))};
  auto opened = storage::open_rocksdb_store(argv[1]);
  if (!opened) {
    std::fprintf(stderr, "open failed: %s\n", opened.error().message.c_str());
    return 1;
  }
  auto store = std::move(*opened);
  storage::group_commit_journal journal{*store};
  system_wall_clock clock;
  system_entropy entropy;
  std::set<std::string> pending;
  {
    actors::system_config config;
    caf::actor_system system{config};
    actors::operation_engine_deps deps{store.get(), &journal, &clock, &entropy, {}, {}};
    // Detached: the runner blocks on fsync.
    auto runner = system.spawn<caf::detached>(file_runner, steps);
    deps.procedures.emplace(kind, runner);
    auto engine = actors::spawn_operation_engine(system, {}, std::move(deps));
    caf::scoped_actor self{system};
    auto fail = [&](const caf::error& err) {
      std::fprintf(stderr, "error: %s\n", system.render(err).c_str());
      std::exit(1);
    };
    self->request(engine, caf::infinite, actors::op_recover_atom::value)
      .receive([](actors::engine_stats&) {}, fail);
    auto active = storage::operation_store{*store}.load_active();
    if (active)
      for (auto& record : *active)
        pending.insert(record.id);
    for (unsigned long i = 0; batch != "-" && i < ops; ++i) {
      actors::operation_request request{
        kind, "target", "tenant", "{}", batch + "-" + std::to_string(i), 0};
      self->request(engine, caf::infinite, actors::op_create_atom::value, request)
        .receive(
          [&](actors::create_reply& reply) {
            std::printf("created %s %s\n", request.idempotency_key.c_str(),
                        reply.record.id.c_str());
            std::fflush(stdout);
            pending.insert(reply.record.id);
          },
          fail);
    }
    auto watcher = caf::actor_cast<caf::actor>(self);
    for (auto i = pending.begin(); i != pending.end();) {
      bool ended = false;
      self->request(engine, caf::infinite, actors::op_watch_atom::value, *i, std::string{}, watcher)
        .receive(
          [&](schema::operation_record& r) {
            print_state(r);
            ended = schema::is_terminal(r.state);
          },
          fail);
      i = ended ? pending.erase(i) : std::next(i);
    }
    while (!pending.empty())
      self->receive([&](actors::op_event_atom, schema::operation_record& r) {
        print_state(r);
        if (schema::is_terminal(r.state))
          pending.erase(r.id);
      });
    std::printf("done\n");
    std::fflush(stdout);
    caf::anon_send_exit(engine, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) { return run(argc, argv); }
