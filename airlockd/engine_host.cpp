#include "airlockd/engine_host.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <chrono>

#include "schema/assert.hpp"
#include "worker/message_types.hpp"

namespace airlock::airlockd {

engine_host::engine_host(engine_host_options options, const actors::logger& log)
    : options_(std::move(options)), log_(log.with_component("operations")),
      config_(actors::actor_system_options{options_.scheduler_threads}) {
  worker::add_worker_message_types(config_);
  if (options_.cluster)
    actors::use_middleman(config_);
}

void engine_host::use_cluster_tls(const cluster_tls_files& files) {
  AIRLOCK_ASSERT(!system_ && options_.cluster, "use_cluster_tls before start_system, in a cluster");
  actors::use_cluster_tls(config_, files);
}

caf::actor_system& engine_host::start_system() {
  if (!system_)
    system_ = std::make_unique<caf::actor_system>(config_);
  return *system_;
}

engine_host::~engine_host() { stop(); }

status engine_host::start(storage::kv_store& store, actors::procedure_table procedures,
                          std::function<void(const schema::operation_record&)> on_terminal) {
  journal_ = std::make_unique<storage::group_commit_journal>(store, options_.journal);
  start_system();
  actors::operation_engine_deps deps{&store,    journal_.get(),        &clock_,
                                     &entropy_, std::move(procedures), std::move(on_terminal)};
  engine_ = actors::spawn_operation_engine(*system_, options_.engine, std::move(deps));
  caf::scoped_actor self{*system_};
  status outcome = status::ok();
  self
    ->request(engine_, std::chrono::milliseconds(options_.recovery_timeout_ms),
              actors::op_recover_atom::value)
    .receive(
      [this](const actors::engine_stats& stats) {
        log_.info("recovered unfinished operations",
                  {{"recovered", stats.recovered}, {"unreadable", stats.unreadable}});
        if (stats.unreadable > 0)
          log_.warn("some stored operations do not decode and were left as they are; "
                    "they need an airlock that can read them",
                    {{"unreadable", stats.unreadable}});
      },
      [&outcome](const caf::error& err) {
        outcome = make_status(errc::unavailable,
                              "operation recovery did not finish: " + to_status(err).message);
      });
  if (!outcome) {
    stop();
    return outcome;
  }
  ready_ = true;
  return status::ok();
}

void engine_host::stop() {
  ready_ = false;
  if (!system_)
    return;
  if (engine_)
    caf::anon_send_exit(engine_, caf::exit_reason::user_shutdown);
  engine_ = nullptr;
  if (on_stop_)
    std::exchange(on_stop_, nullptr)();
  system_->await_all_actors_done();
  system_.reset();
  // Last: every actor that could submit a transition is gone.
  if (journal_) {
    auto stats = journal_->stats();
    log_.info("journal stopped", {{"transitions", stats.transitions}, {"syncs", stats.syncs}});
    journal_.reset();
  }
}

} // namespace airlock::airlockd
