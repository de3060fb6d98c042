#include "actors/system_config.hpp"

#include <caf/atom.hpp>
#include <caf/message.hpp>

#include <chrono>
#include <string>

#include "actors/errors.hpp"
#include "actors/type_ids.hpp"

namespace airlock::actors {

system_config::system_config(const actor_system_options& options) {
  add_message_types<caf::id_block::airlock>();
  add_error_category(errc_category, [](uint8_t code, caf::atom_value, const caf::message& context) {
    auto text = std::string(to_string(static_cast<errc>(code)));
    // Show the sentence itself, not CAF's tuple rendering of it.
    if (context.match_elements<std::string>())
      text += ": " + context.get_as<std::string>(0);
    return text;
  });
  if (options.scheduler_threads > 0)
    set("scheduler.max-threads", options.scheduler_threads);
  // A message to an idle actor is queued on the sender's scheduler thread; if
  // that thread then blocks or stays busy, the job waits until an idle thread
  // steals it, and an idle thread only looks once per relaxed sleep (CAF's
  // default: 10 ms). That wait was half of a warm pool claim's p50 (9 ms to
  // 4.5 ms, bench/pool_bench); 1 ms costs an idle daemon a thousand short
  // wake-ups a second per scheduler thread.
  set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(1)});
  set("logger.file-verbosity", caf::atom("quiet"));
  set("logger.console-verbosity", caf::atom("quiet"));
}

void use_test_scheduler(caf::actor_system_config& config) {
  config.set("scheduler.policy", caf::atom("testing"));
  config.set("logger.inline-output", true);
}

} // namespace airlock::actors
