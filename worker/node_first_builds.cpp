// The node's templates on first use: a built-in one (minimal, base) is built
// the first time a create needs it, once however many wait; a sealed one found
// on disk is ready at once.

#include <caf/blocking_actor.hpp>
#include <caf/send.hpp>

#include <functional>
#include <memory>
#include <string>

#include "worker/node_state.hpp"

namespace airlock::worker::node_detail {

namespace {

/// Blocking (a build runs for seconds to minutes): on a helper thread only.
template_outcome prepare_template(rootfs_driver& driver, const template_options& options,
                                  const std::string& name, const build_control& control) {
  if (template_builder::is_known(name)) {
    template_builder builder(driver, options);
    auto built = builder.ensure(name, control);
    if (!built)
      return {name, built.error(), {}};
    return {name, status::ok(), defaults_from_manifest(driver, name)};
  }
  if (driver.has_template(name))
    return {name, status::ok(), defaults_from_manifest(driver, name)};
  std::string names = "minimal, base (both built on first use)";
  if (auto sealed = driver.list_templates(); sealed) {
    for (const auto& other : *sealed)
      if (!template_builder::is_known(other))
        names += ", " + other;
  }
  return {name,
          make_status(errc::not_found, "no template \"" + name
                                         + "\" on this worker; templates that exist: " + names),
          {}};
}

} // namespace

/// Runs `then` once template `name` is ready (or could not be made). One
/// build per name at a time: later callers wait for the running one.
void ensure_template(self_ptr self, const std::string& name,
                     std::function<void(const status&)> then) {
  auto& st = self->state;
  if (st.ready_templates.contains(name)) {
    then(status::ok());
    return;
  }
  auto& build = st.builds[name];
  build.waiters.push_back(std::move(then));
  if (build.waiters.size() > 1)
    return;
  build.watch = std::make_shared<build_watch>();
  build_control control;
  control.progress = [watch = build.watch](std::string_view phase, int percent,
                                           std::string_view line) {
    watch->report_phase(std::string(phase), percent, line);
  };
  // Not cancellable: every create that needs the template waits for it.
  auto rootfs = st.context.rootfs;
  auto options = st.context.templates;
  node_impl_actor me = self;
  self->home_system().spawn([rootfs, options, name, control, me](caf::blocking_actor*) {
    caf::anon_send(me, nd_built_atom::value, prepare_template(*rootfs, options, name, control));
  });
}

/// A first build ended: its waiters go on.
void on_built(self_ptr self, const template_outcome& done) {
  auto& st = self->state;
  auto it = st.builds.find(done.name);
  if (it == st.builds.end())
    return;
  auto waiting = std::move(it->second.waiters);
  st.builds.erase(it);
  if (done.outcome)
    st.ready_templates[done.name] = done.defaults;
  for (auto& then : waiting)
    then(done.outcome);
}

} // namespace airlock::worker::node_detail
