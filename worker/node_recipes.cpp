// Template versions from a recipe (POST /v1/templates, docs/templates.md):
// the starting tree (another template's version, or a debootstrap of a suite
// with packages, staged as a template of its own) becomes the root of a
// build sandbox, which runs the recipe's `run` steps as root with the
// recipe's egress, then `ready_cmd` until it succeeds. The sandbox is then
// stopped with its root kept, and that root becomes the version
// (rootfs_driver::template_from_sandbox), with a manifest of the recipe's
// defaults. A failing step fails the build, names the step and carries the
// tail of its output; the build sandbox and any stage go either way.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/errors.hpp"
#include "schema/atomic_file.hpp"
#include "worker/node_state.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker::node_detail {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

/// The output read from a running step at a time; the log streams it.
constexpr uint64_t output_chunk_bytes = 64 << 10;
/// How long one read of a step's output waits for more.
constexpr uint32_t output_wait_ms = 1000;
/// How long one step (and ready_cmd's whole retry loop) may run.
constexpr uint32_t step_wait_ms = 20 * 60 * 1000;
/// ready_cmd is tried once a second this many times.
constexpr int ready_attempts_max = 120;

struct recipe {
  std::string base;  ///< a template's worker name; empty: debootstrap
  std::string suite; ///< debootstrap
  std::vector<std::string> packages;
  std::vector<std::string> run;
  std::string ready_cmd;
  schema::egress_policy egress;
  std::vector<std::pair<std::string, std::string>> env;
  std::string workdir;
  std::string user;
  std::string start_cmd;
  std::string source; ///< for the manifest
};

result<recipe> parse_recipe(const actors::template_build& build) {
  auto bad = [](const std::string& why) {
    return make_status(errc::invalid_argument, "template recipe: " + why);
  };
  auto doc = json::parse(build.recipe_json, nullptr, false);
  if (!doc.is_object() || !doc.contains("from") || !doc["from"].is_object())
    return bad("not a JSON object with \"from\"");
  recipe out;
  try {
    const auto& from = doc["from"];
    if (from.contains("template")) {
      out.base = build.base_worker_name;
      if (!is_valid_name(out.base))
        return bad("a build from a template needs that template's name on this worker");
      out.source = "recipe from template " + from["template"].get<std::string>();
    } else {
      const auto& boot = from.at("debootstrap");
      out.suite = boot.at("suite").get<std::string>();
      out.packages = boot.at("packages").get<std::vector<std::string>>();
      out.source = "recipe from debootstrap " + out.suite;
    }
    out.run = doc.value("run", std::vector<std::string>{});
    out.ready_cmd = doc.value("ready_cmd", "");
    if (doc.contains("egress")) {
      auto profile = schema::parse_egress_profile(doc["egress"].value("profile", "none"));
      if (!profile)
        return bad("unknown egress profile");
      out.egress.profile = *profile;
      out.egress.allow = doc["egress"].value("allow", std::vector<std::string>{});
    }
    if (auto env = doc.find("env"); env != doc.end() && env->is_object())
      for (auto pair = env->begin(); pair != env->end(); ++pair)
        out.env.emplace_back(pair.key(), pair.value().get<std::string>());
    out.workdir = doc.value("workdir", "");
    out.user = doc.value("user", "");
    out.start_cmd = doc.value("start_cmd", "");
  } catch (const json::exception& error) {
    return bad(error.what());
  }
  return out;
}

/// One build in flight; every step continues on the node actor.
struct recipe_build : std::enable_shared_from_this<recipe_build> {
  self_ptr self;
  actors::template_build build;
  recipe plan;
  std::string sandbox_id; ///< the build sandbox
  std::string stage;      ///< a debootstrap's staged template; empty: none
  sandbox_actor box;
  bool sandbox_made = false;
  size_t next_step = 0;
  bool start_cmd_started = false;
  std::shared_ptr<build_watch> watch;

  void note(const std::string& text) { watch->append(text); }

  std::string log_tail(size_t bytes) const { return watch->tail(bytes); }

  /// The share of the build (in percent) where the debootstrap or base ends
  /// and where the steps (run lines, then ready_cmd) end; sealing is the rest.
  int32_t start_share() const { return plan.base.empty() ? 50 : 5; }
  static constexpr int32_t steps_end = 90;

  /// Progress at step `index` of run lines and ready_cmd.
  void report_step(size_t index, const std::string& name) {
    const size_t steps = plan.run.size() + (plan.ready_cmd.empty() ? 0 : 1);
    const int32_t low = start_share();
    watch->set_step(
      name, low + static_cast<int32_t>((steps_end - low) * index / std::max<size_t>(steps, 1)));
  }

  /// Ends the build with `why`; what it made goes first.
  void fail(status why) {
    if (watch->cancelled())
      why = make_status(errc::cancelled, "the build of " + build.worker_name + " was cancelled");
    else if (auto tail = log_tail(2048); !tail.empty())
      why.message += "; the build log ends:\n" + tail;
    auto me = shared_from_this();
    cleanup([me, why] { end_build(me->self, me->build.worker_name, why); });
  }

  /// A cancel request: a running step ends with its sandbox; the build
  /// then fails cancelled at its next turn.
  void cancel() {
    if (!box)
      return; // debootstrap polls the flag; a create in flight is checked after
    self
      ->request(self->state.context.worker, milliseconds(opts(self).destroy_timeout_ms),
                wk_destroy_atom::value, sandbox_id)
      .then([](bool) {}, [](caf::error&) {}); // the build's cleanup destroys it again
  }

  /// Destroys the build sandbox (and its kept root) and the stage.
  void cleanup(std::function<void()> then) {
    auto me = shared_from_this();
    auto drop_stage = [me, then] {
      if (me->stage.empty())
        return then();
      auto rootfs = me->self->state.context.rootfs;
      off_the_node<bool>(
        me->self,
        [rootfs, stage = me->stage]() -> result<bool> {
          if (auto deleted = rootfs->delete_template(stage); !deleted)
            return deleted;
          return true;
        },
        [then](bool&) { then(); }, [then](caf::error&) { then(); });
    };
    if (!sandbox_made)
      return drop_stage();
    self
      ->request(self->state.context.worker, milliseconds(opts(self).destroy_timeout_ms),
                wk_destroy_atom::value, sandbox_id)
      .then([drop_stage](bool) { drop_stage(); }, [drop_stage](caf::error&) { drop_stage(); });
  }

  void start() {
    auto me = shared_from_this();
    if (!plan.base.empty()) {
      watch->set_step("base", 0);
      note("# from " + plan.base + "\n");
      return ensure_template(self, plan.base, [me](const status& ready) {
        if (!ready)
          return me->fail(ready);
        me->create_sandbox(me->plan.base);
      });
    }
    // debootstrap into a stage template, the build sandbox's root.
    stage = build.worker_name + "-stage";
    note("# debootstrap " + plan.suite + " with " + std::to_string(plan.packages.size())
         + " packages\n");
    watch->set_step("debootstrap", 0);
    auto rootfs = self->state.context.rootfs;
    auto options = self->state.context.templates;
    options.suite = plan.suite;
    options.base_packages = plan.packages;
    build_control control;
    control.cancel = watch->cancel_flag();
    control.progress = [watch = watch, share = start_share()](std::string_view phase, int percent,
                                                              std::string_view line) {
      watch->report_phase("debootstrap " + std::string(phase), percent * share / 100, line);
    };
    off_the_node<bool>(
      self,
      [rootfs, options, control, stage = stage]() -> result<bool> {
        (void)rootfs->delete_template(stage); // what a crashed build left
        auto dir = rootfs->create_template(stage);
        if (!dir)
          return dir.error();
        auto filled = populate_base(*dir, options, control);
        if (filled)
          filled = rootfs->seal_template(stage);
        if (!filled) {
          (void)unmount_below(*dir);
          (void)rootfs->delete_template(stage);
          return filled;
        }
        return true;
      },
      [me](bool&) { me->create_sandbox(me->stage); },
      [me](caf::error& error) { me->fail(to_status(error)); });
  }

  void create_sandbox(const std::string& from) {
    create_sandbox_request req;
    req.id = sandbox_id;
    req.template_name = from;
    req.limits.cpu_millis = 2000;
    req.limits.memory_mb = 2048;
    req.limits.pids_max = 4096;
    req.egress.template_name = from;
    req.egress.policy = plan.egress;
    auto me = shared_from_this();
    sandbox_made = true; // a failed create leaves nothing, and destroy is idempotent
    self
      ->request(self->state.context.worker, milliseconds(opts(self).create_timeout_ms),
                wk_create_atom::value, req)
      .then(
        [me](const sandbox_actor& made) {
          me->box = made;
          me->run_next();
        },
        [me](caf::error& error) { me->fail(to_status(error)); });
  }

  /// A step's process: `cmd` as root, with the recipe's env.
  actors::exec_spec step_spec(const std::string& cmd) const {
    actors::exec_spec spec;
    spec.cmd = cmd;
    spec.cwd = "/"; // the workdir may be what the steps make
    spec.env = {
      {"PATH", opts(self).default_path}, {"HOME", "/root"}, {"DEBIAN_FRONTEND", "noninteractive"}};
    for (const auto& pair : plan.env)
      spec.env.push_back(pair);
    spec.report_start_failure = true;
    return spec;
  }

  /// Runs `cmd` as root to its end; `then` gets its row.
  void exec(const std::string& cmd, std::function<void(const actors::process_view&)> then) {
    auto me = shared_from_this();
    self
      ->request(box, milliseconds(opts(self).call_timeout_ms), sbx_exec_atom::value, step_spec(cmd))
      .then([me, then](const std::string& id) { me->wait(id, then); },
            [me](caf::error& error) { me->fail(to_status(error)); });
  }

  /// Streams the process's output into the log until it ends (bounded by
  /// step_wait_ms), then hands its row to `then`.
  void wait(const std::string& id, std::function<void(const actors::process_view&)> then,
            uint64_t offset = 0, uint32_t waited_ms = 0) {
    if (waited_ms >= step_wait_ms)
      return fail(make_status(errc::timeout, "a build step ran longer than "
                                               + std::to_string(step_wait_ms / 1000) + " s"));
    output_read read;
    read.process_id = id;
    read.offset = offset;
    read.max_bytes = output_chunk_bytes;
    read.wait_ms = output_wait_ms;
    auto me = shared_from_this();
    self
      ->request(box, milliseconds(output_wait_ms + opts(self).call_timeout_ms),
                sbx_output_atom::value, read)
      .then(
        [me, id, then, offset, waited_ms](const output_reply& reply) {
          if (reply.start_offset > offset)
            me->note("[" + std::to_string(reply.start_offset - offset)
                     + " bytes of output lost]\n");
          for (const auto& piece : reply.pieces)
            me->note(piece.bytes);
          if (!reply.exited)
            return me->wait(id, then, reply.next_offset, waited_ms + output_wait_ms);
          me->finished(id, then);
        },
        [me](caf::error& error) { me->fail(to_status(error)); });
  }

  /// The row of a process whose output ended.
  void finished(const std::string& id, std::function<void(const actors::process_view&)> then) {
    auto me = shared_from_this();
    self
      ->request(box, milliseconds(opts(self).call_timeout_ms), sbx_wait_atom::value, id,
                uint32_t{0})
      .then(
        [me, then](const actors::process_view& row) {
          if (!row.error.empty())
            me->note(row.error + "\n");
          then(row);
        },
        [me](caf::error& error) { me->fail(to_status(error)); });
  }

  void run_next() {
    if (watch->cancelled())
      return fail(make_status(errc::cancelled, "cancelled"));
    if (next_step == plan.run.size())
      return ready();
    const auto index = next_step++;
    const auto& line = plan.run[index];
    report_step(index, "run " + std::to_string(index + 1) + "/" + std::to_string(plan.run.size()));
    note("$ " + line + "\n");
    auto me = shared_from_this();
    exec(line, [me, index, line](const actors::process_view& row) {
      if (row.exit_code != 0 || row.signal != 0)
        return me->fail(
          make_status(errc::invalid_argument,
                      "run step " + std::to_string(index + 1) + " (" + line + ") "
                        + (row.signal != 0 ? "was killed by signal " + std::to_string(row.signal)
                                           : "exited with code " + std::to_string(row.exit_code))));
      me->run_next();
    });
  }

  /// ready_cmd until it succeeds, once a second, bounded. What it waits for
  /// is usually what start_cmd serves, so start_cmd is started first (in
  /// the background, as root; it ends with the build sandbox), as a microVM
  /// base of the template does it before its memory is saved.
  void ready() {
    if (plan.ready_cmd.empty())
      return finish();
    if (!plan.start_cmd.empty() && !start_cmd_started) {
      start_cmd_started = true;
      note("$ start_cmd: " + plan.start_cmd + "\n");
      auto spec = step_spec(plan.start_cmd);
      spec.cwd = plan.workdir.empty() ? "/" : plan.workdir;
      auto me = shared_from_this();
      self->request(box, milliseconds(opts(self).call_timeout_ms), sbx_exec_atom::value, spec)
        .then([me](const std::string&) { me->ready(); },
              [me](caf::error& error) { me->fail(to_status(error)); });
      return;
    }
    report_step(plan.run.size(), "ready_cmd");
    note("$ ready_cmd: " + plan.ready_cmd + "\n");
    auto me = shared_from_this();
    exec(retried_each_second(plan.ready_cmd, ready_attempts_max),
         [me](const actors::process_view& row) {
           if (row.exit_code != 0 || row.signal != 0)
             return me->fail(make_status(errc::invalid_argument,
                                         "ready_cmd did not succeed in "
                                           + std::to_string(ready_attempts_max) + " tries"));
           me->finish();
         });
  }

  /// Stops the sandbox keeping its root, which becomes the version.
  void finish() {
    if (watch->cancelled())
      return fail(make_status(errc::cancelled, "cancelled"));
    watch->set_step("seal", steps_end);
    auto me = shared_from_this();
    self
      ->request(self->state.context.worker, milliseconds(opts(self).destroy_timeout_ms),
                wk_release_atom::value, sandbox_id)
      .then([me](bool) { me->seal(); }, [me](caf::error& error) { me->fail(to_status(error)); });
  }

  void seal() {
    auto rootfs = self->state.context.rootfs;
    template_manifest manifest;
    manifest.name = build.worker_name;
    manifest.source = plan.source;
    manifest.start_cmd = plan.start_cmd;
    manifest.ready_cmd = plan.ready_cmd;
    for (const auto& [key, value] : plan.env)
      manifest.env.push_back(key + "=" + value);
    manifest.workdir = plan.workdir;
    manifest.user = plan.user;
    auto me = shared_from_this();
    off_the_node<actors::template_built>(
      self,
      [rootfs, manifest, id = sandbox_id]() mutable -> result<actors::template_built> {
        auto dir = rootfs->template_from_sandbox(id, manifest.name);
        if (!dir)
          return dir.error();
        auto size = measure_tree(*dir);
        manifest.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
        manifest.size_bytes = size ? size->apparent_bytes : 0;
        manifest.files = size ? size->files : 0;
        auto built =
          write_file_atomically(manifest_path(rootfs->templates_dir(), manifest.name).string(),
                                manifest_to_json(manifest), 0644);
        if (built)
          built = rootfs->seal_template(manifest.name);
        if (!built) {
          (void)rootfs->delete_template(manifest.name);
          return built;
        }
        return to_built(manifest);
      },
      [me](actors::template_built& built) {
        built.log_tail = me->log_tail(4096);
        me->cleanup([me, built] {
          me->self->state.ready_templates.erase(me->build.worker_name);
          end_build(me->self, me->build.worker_name, built);
        });
      },
      [me](caf::error& error) { me->fail(to_status(error)); });
  }
};

} // namespace

caf::result<actors::template_built> handle_recipe_build(self_ptr self,
                                                        const actors::template_build& build) {
  auto rootfs = self->state.context.rootfs;
  if (!rootfs)
    return make_error(errc::unavailable, "this worker has no rootfs driver: no templates");
  auto plan = parse_recipe(build);
  if (!plan)
    return make_error(plan.error());
  if (rootfs->has_template(build.worker_name)) { // built already: a repeat
    auto text = read_file(manifest_path(rootfs->templates_dir(), build.worker_name));
    if (!text)
      return make_error(text.error());
    auto manifest = parse_manifest(*text);
    if (!manifest)
      return make_error(manifest.error());
    return to_built(*manifest);
  }
  auto [promise, start, watch] = join_build(self, build.worker_name);
  if (!start)
    return promise; // a repeat (the control plane waits in rounds): joins the build
  auto job = std::make_shared<recipe_build>();
  job->self = self;
  job->build = build;
  job->plan = std::move(*plan);
  job->watch = watch;
  self->state.image_builds[build.worker_name].on_cancel = [weak = std::weak_ptr(job)] {
    if (auto me = weak.lock())
      me->cancel();
  };
  job->sandbox_id = "tplb-" + std::to_string(std::hash<std::string>{}(build.worker_name));
  job->start();
  return promise;
}

} // namespace airlock::worker::node_detail
