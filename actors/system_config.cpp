#include "actors/system_config.hpp"

#include <caf/atom.hpp>
#include <caf/message.hpp>

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
  set("logger.file-verbosity", caf::atom("quiet"));
  set("logger.console-verbosity", caf::atom("quiet"));
}

void use_test_scheduler(caf::actor_system_config& config) {
  config.set("scheduler.policy", caf::atom("testing"));
  config.set("logger.inline-output", true);
}

} // namespace airlock::actors
