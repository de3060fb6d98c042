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

/// What the build log keeps (its tail goes to the version's record).
constexpr size_t log_bytes_max = 64 << 10;
/// The output of one step the log takes (its tail).
constexpr uint64_t step_output_max = 16 << 10;
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
  std::string log;

  void note(const std::string& text) {
    log += text;
    if (log.size() > log_bytes_max)
      log.erase(0, log.size() - log_bytes_max);
  }

  std::string log_tail(size_t bytes) const {
    return log.size() <= bytes ? log : log.substr(log.size() - bytes);
  }

  /// Ends the build with `why`; what it made goes first.
  void fail(status why) {
    if (!log.empty())
      why.message += "; the build log ends:\n" + log_tail(2048);
    auto me = shared_from_this();
    cleanup([me, why] { end_build(me->self, me->build.worker_name, why); });
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
    auto rootfs = self->state.context.rootfs;
    auto options = self->state.context.templates;
    options.suite = plan.suite;
    options.base_packages = plan.packages;
    off_the_node<bool>(
      self,
      [rootfs, options, stage = stage]() -> result<bool> {
        (void)rootfs->delete_template(stage); // what a crashed build left
        auto dir = rootfs->create_template(stage);
        if (!dir)
          return dir.error();
        auto filled = populate_base(*dir, options, {});
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

  /// Runs `cmd` as root to its end; `then` gets its row.
  void exec(const std::string& cmd, std::function<void(const actors::process_view&)> then) {
    actors::exec_spec spec;
    spec.cmd = cmd;
    spec.cwd = "/"; // the workdir may be what the steps make
    spec.env = {
      {"PATH", opts(self).default_path}, {"HOME", "/root"}, {"DEBIAN_FRONTEND", "noninteractive"}};
    for (const auto& pair : plan.env)
      spec.env.push_back(pair);
    spec.report_start_failure = true;
    auto me = shared_from_this();
    self->request(box, milliseconds(opts(self).call_timeout_ms), sbx_exec_atom::value, spec)
      .then([me, then](const std::string& id) { me->wait(id, then); },
            [me](caf::error& error) { me->fail(to_status(error)); });
  }

  void wait(const std::string& id, std::function<void(const actors::process_view&)> then) {
    auto me = shared_from_this();
    self
      ->request(box, milliseconds(step_wait_ms + opts(self).call_timeout_ms), sbx_wait_atom::value,
                id, step_wait_ms)
      .then(
        [me, id, then](const actors::process_view& row) {
          if (!schema::has_ended(row.state))
            return me->fail(make_status(errc::timeout, "a build step ran longer than "
                                                         + std::to_string(step_wait_ms / 1000)
                                                         + " s"));
          me->collect(id, row, then);
        },
        [me](caf::error& error) { me->fail(to_status(error)); });
  }

  /// Adds the tail of the process's output to the log.
  void collect(const std::string& id, const actors::process_view& row,
               std::function<void(const actors::process_view&)> then) {
    const uint64_t total = row.stdout_bytes + row.stderr_bytes;
    output_read read;
    read.process_id = id;
    read.offset = total > step_output_max ? total - step_output_max : 0;
    read.max_bytes = step_output_max;
    auto me = shared_from_this();
    self->request(box, milliseconds(opts(self).call_timeout_ms), sbx_output_atom::value, read)
      .then(
        [me, row, then](const output_reply& reply) {
          for (const auto& piece : reply.pieces)
            me->note(piece.bytes);
          if (!row.error.empty())
            me->note(row.error + "\n");
          then(row);
        },
        [me, row, then](caf::error&) { then(row); }); // the row is what matters
  }

  void run_next() {
    if (next_step == plan.run.size())
      return ready();
    const auto index = next_step++;
    const auto& line = plan.run[index];
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

  /// ready_cmd until it succeeds, once a second, bounded.
  void ready() {
    if (plan.ready_cmd.empty())
      return finish();
    note("$ ready_cmd: " + plan.ready_cmd + "\n");
    const std::string loop = "i=0; until ( " + plan.ready_cmd + " ); do i=$((i+1)); [ $i -ge "
                             + std::to_string(ready_attempts_max) + " ] && exit 1; sleep 1; done";
    auto me = shared_from_this();
    exec(loop, [me](const actors::process_view& row) {
      if (row.exit_code != 0 || row.signal != 0)
        return me->fail(make_status(errc::invalid_argument, "ready_cmd did not succeed in "
                                                              + std::to_string(ready_attempts_max)
                                                              + " tries"));
      me->finish();
    });
  }

  /// Stops the sandbox keeping its root, which becomes the version.
  void finish() {
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
    manifest.guest_binary = self->state.context.templates.guest_binary.string();
    manifest.start_cmd = plan.start_cmd;
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
  auto [promise, start] = join_build(self, build.worker_name);
  if (!start)
    return promise; // a repeat (the control plane waits in rounds): joins the build
  auto job = std::make_shared<recipe_build>();
  job->self = self;
  job->build = build;
  job->plan = std::move(*plan);
  job->sandbox_id = "tplb-" + std::to_string(std::hash<std::string>{}(build.worker_name));
  job->start();
  return promise;
}

} // namespace airlock::worker::node_detail
