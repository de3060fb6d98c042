#pragma once
// The node actor's state, shared by the files that implement it (internal to
// worker/: node_actor.cpp runs the behaviour, templates, the lifecycle and the
// data-plane forwarding; node_translation.cpp translates the cluster
// protocol's values (actors/cluster_protocol.hpp: sandbox records, exec and
// file specs, process views, output batches) to and from the worker's own
// requests and replies). Not a public header: node_actor.hpp is the contract.

#include <caf/actor_clock.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "actors/build_progress.hpp"
#include "actors/inspect_fields.hpp"
#include "worker/build_watch.hpp"
#include "worker/node_actor.hpp"
#include "worker/process_identity.hpp"

namespace airlock::worker::node_detail {

// Internal to the node actor: a template build finished off the actor.
using nd_built_atom = caf::atom_constant<caf::atom("ndbuilt")>;

/// What a template's manifest sets for its sandboxes' processes (an image's
/// Entrypoint/Cmd, WorkingDir and User); empty: nothing.
struct template_defaults {
  std::string start_cmd;
  std::string workdir;
  std::string user;
};

struct template_outcome {
  std::string name;
  status outcome;
  template_defaults defaults;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, template_outcome& x) {
  return f(caf::meta::type_name("template_outcome"), x.name, x.outcome, x.defaults.start_cmd,
           x.defaults.workdir, x.defaults.user);
}

using actors::node_sandbox;
using schema::sandbox_state;
using node_sandbox_promise = caf::typed_response_promise<node_sandbox>;

/// The node's interface plus what its helper threads send back.
using node_impl_actor = actors::node_actor::extend<caf::reacts_to<nd_built_atom, template_outcome>>;

/// A sandbox this node created (or is creating).
struct tracked_sandbox {
  schema::sandbox_record record;
  sandbox_state state = sandbox_state::creating;
  bool reuse_root = false; ///< brought back from the root an earlier run left
  /// When a data-plane call last reached it (none yet: nullopt).
  std::optional<caf::actor_clock::time_point> last_data_plane;
  std::vector<node_sandbox_promise> create_waiters;  ///< joined creates
  std::vector<node_sandbox_promise> destroy_waiters; ///< destroys that wait for the create
  /// Run once the create ended, whatever its outcome (a claim of a pool
  /// member that a restarted worker is bringing back waits for it).
  std::vector<std::function<void()>> after_create;
};

/// A template version being made on this worker: the calls that wait for it
/// (a repeat joins the build) and where it stands.
struct image_build {
  std::vector<caf::typed_response_promise<actors::template_built>> waiting;
  std::shared_ptr<build_watch> watch = std::make_shared<build_watch>();
  /// Stops work of the build that runs on the node (a recipe's sandbox);
  /// helper threads poll the watch's flag instead. May be empty.
  std::function<void()> on_cancel;
};

struct node_state {
  static inline const char* name = "node";
  node_context context;
  std::map<std::string, tracked_sandbox> sandboxes;
  /// Templates ready on this worker, with what each sets for processes.
  std::map<std::string, template_defaults> ready_templates;
  /// A template's first build on this worker (minimal, base), which the
  /// creates that need it wait for.
  struct first_build {
    std::vector<std::function<void(const status&)>> waiters; ///< run when it ends
    std::shared_ptr<build_watch> watch;                      ///< its progress, read by nd_twatch
  };
  /// First builds under way, by template name.
  std::map<std::string, first_build> builds;
  size_t waiting_creates = 0;
  /// Template versions being made on this worker (uploads and recipes), by name.
  std::map<std::string, image_build> image_builds;
};

using self_ptr = node_impl_actor::stateful_pointer<node_state>;

inline const node_options& opts(self_ptr self) { return self->state.context.options; }

// ---- translation (node_translation.cpp) -------------------------------------

create_sandbox_request to_create_request(const schema::sandbox_record& record);

using actors::worker_template_of;

/// What template `name`'s manifest sets for processes (nothing without
/// one). Blocking: reads the manifest file.
template_defaults defaults_from_manifest(rootfs_driver& driver, const std::string& name);

/// What sandbox `id`'s template sets for its processes (nothing when the
/// sandbox or its template is unknown here).
template_defaults defaults_of(self_ptr self, const std::string& id);

/// A sandbox actor's process row with its times (actor clock) in Unix ms.
/// An actor-clock time (what the sandbox actor keeps) as Unix ms; 0 stays 0.
int64_t to_unix_ms(self_ptr self, int64_t actor_ms);

actors::process_view with_unix_times(self_ptr self, actors::process_view view);

/// `spec` resolved for the sandbox actor: run as `user`, the whole
/// environment, start failures reported as failed processes.
actors::exec_spec resolve_exec(self_ptr self, const std::string& sandbox_id, actors::exec_spec spec,
                               const schema::process_user& user);

// ---- template versions from uploads (node_templates.cpp) -----------------

/// Where uploads are spooled: DATA_DIR/rootfs/spool.
inline std::filesystem::path spool_dir_of(const rootfs_driver& rootfs) {
  return rootfs.templates_dir().parent_path() / "spool";
}

/// Runs `work` on a detached actor of its own, then `ok` or `fail` on the
/// node with its outcome: template builds and deletes block on the disk.
template <class T>
void off_the_node(self_ptr self, std::function<result<T>()> work, std::function<void(T&)> ok,
                  std::function<void(caf::error&)> fail) {
  auto helper = self->home_system().spawn<caf::detached>([work](caf::event_based_actor* me) {
    return caf::behavior{[me, work](actors::nd_tbuild_atom) -> caf::result<T> {
      me->quit();
      auto done = work();
      if (!done)
        return make_error(done.error());
      return std::move(*done);
    }};
  });
  self->request(helper, caf::infinite, actors::nd_tbuild_atom::value)
    .then([ok](T& value) { ok(value); }, [fail](caf::error& error) { fail(error); });
}

/// A call that waits for build `name` of a template version.
struct joined_build {
  caf::typed_response_promise<actors::template_built> promise;
  bool start = false; ///< the caller is to start the build (else it joins the one under way)
  std::shared_ptr<build_watch> watch;
};
joined_build join_build(self_ptr self, const std::string& name);

/// Answers every call waiting for build `name` with `outcome` and keeps its
/// log beside the templates; the build is no longer under way. A build that
/// was asked to stop ends cancelled whatever its own error said.
void end_build(self_ptr self, const std::string& name,
               const result<actors::template_built>& outcome);

/// nd_twatch: where build `name` stands (or its saved log once it ended).
caf::result<actors::template_progress> handle_template_watch(self_ptr self, const std::string& name,
                                                             uint64_t log_offset, bool cancel);

/// A version's manifest as the control plane records it.
actors::template_built to_built(const template_manifest& manifest);

caf::result<uint64_t> handle_spool(self_ptr self, const std::string& spool_id, uint64_t offset,
                                   const std::string& bytes, bool last);
caf::result<actors::template_built> handle_template_build(self_ptr self,
                                                          const actors::template_build& build);
caf::result<bool> handle_template_delete(self_ptr self, const std::string& worker_name);

// ---- policy and hand-over of a running sandbox (node_handover.cpp) ---------

/// A new egress policy for running sandbox `record.id`.
caf::result<node_sandbox> handle_egress(self_ptr self, const schema::sandbox_record& record);

/// A create claims warm pool member `record.id`: it becomes `record`'s sandbox.
caf::result<node_sandbox> handle_claim(self_ptr self, const schema::sandbox_record& record);

// ---- template versions from recipes (node_recipes.cpp) ----------------------

/// Builds `build` (format "recipe"): a build sandbox of the starting tree
/// (another template, or debootstrap) runs the run steps and ready_cmd; its
/// root then becomes the version.
caf::result<actors::template_built> handle_recipe_build(self_ptr self,
                                                        const actors::template_build& build);

/// Runs `then` once template `name` is ready on this worker (built first
/// when it is a built-in one), or with why it is not.
void ensure_template(self_ptr self, const std::string& name,
                     std::function<void(const status&)> then);
/// A first build that ensure_template started ended: its waiters go on.
void on_built(self_ptr self, const template_outcome& done);

actors::output_batch to_batch(output_reply& reply);
file_request to_file_request(actors::file_spec& spec);
actors::file_result to_file_result(file_reply& reply, const std::string& path);

} // namespace airlock::worker::node_detail
