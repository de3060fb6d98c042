// The node's template versions made from uploads: the spooled archive
// (nd_spool), the build (nd_tbuild) and the delete (nd_tdel). Builds and
// deletes block on the disk for seconds to minutes, so each runs on a
// detached helper actor of its own; the node only keeps what is in flight.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "actors/errors.hpp"
#include "worker/node_state.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/image_template.hpp"

namespace airlock::worker::node_detail {

namespace {

std::filesystem::path spool_dir(self_ptr self) { return spool_dir_of(*self->state.context.rootfs); }

/// Spool ids and template names are single path components.
caf::error check_name(std::string_view what, const std::string& name) {
  if (!is_valid_name(name))
    return make_error(errc::invalid_argument,
                      std::string(what) + " \"" + name + "\" is not 1 to 128 of [A-Za-z0-9_-]");
  return caf::none;
}

/// An import's step as the build's progress: the outer archive is the first
/// fifth, the layers the next three quarters, the rest sealing. Stops the
/// import once the build is cancelled.
void report_import(build_watch& watch, const import_progress& at) {
  if (watch.cancelled())
    throw import_stopped("the build was cancelled");
  const double part = at.bytes_total == 0 ? 1.0 : double(at.bytes_done) / double(at.bytes_total);
  double percent = 97;
  if (at.step == "unpack")
    percent = 20 * part;
  else if (at.layers > 0 && at.layer > 0)
    percent = 20 + 75 * ((at.layer - 1) + part) / at.layers;
  watch.set_step(at.step, static_cast<int32_t>(percent), at.bytes_done, at.bytes_total);
  if (at.bytes_done == 0)
    watch.append("# " + at.step + ": " + std::to_string(at.bytes_total) + " bytes\n");
}

} // namespace

actors::template_built to_built(const template_manifest& manifest) {
  actors::template_built out;
  out.digest = manifest.digest;
  out.size_bytes = manifest.size_bytes;
  out.files = manifest.files;
  for (const auto& pair : manifest.env) {
    auto eq = pair.find('=');
    out.env.emplace_back(pair.substr(0, eq), eq == std::string::npos ? "" : pair.substr(eq + 1));
  }
  out.workdir = manifest.workdir;
  out.user = manifest.user;
  out.start_cmd = manifest.start_cmd;
  return out;
}

/// What template `name`'s manifest sets for processes (nothing without one).
template_defaults defaults_from_manifest(rootfs_driver& driver, const std::string& name) {
  auto text = read_file(manifest_path(driver.templates_dir(), name));
  if (!text)
    return {};
  auto manifest = parse_manifest(*text);
  if (!manifest)
    return {};
  return {manifest->start_cmd, manifest->workdir, manifest->user};
}

template_defaults defaults_of(self_ptr self, const std::string& id) {
  auto sandbox = self->state.sandboxes.find(id);
  if (sandbox == self->state.sandboxes.end())
    return {};
  auto found = self->state.ready_templates.find(worker_template_of(sandbox->second.record.spec));
  return found == self->state.ready_templates.end() ? template_defaults{} : found->second;
}

caf::result<uint64_t> handle_spool(self_ptr self, const std::string& spool_id, uint64_t offset,
                                   const std::string& bytes, bool last) {
  if (auto bad = check_name("spool id", spool_id))
    return bad;
  if (!self->state.context.rootfs)
    return make_error(errc::unavailable, "this worker has no rootfs driver: no templates");
  const auto dir = spool_dir(self);
  if (auto made = make_dirs(dir, 0700); !made)
    return make_error(made);
  const auto part = dir / (spool_id + ".part");
  const auto done = dir / spool_id;
  // One chunk (at most the gateway's chunk size) written in place: a local
  // append of about a MiB, which the node's thread can afford.
  auto fd = open_fd(part, O_WRONLY | O_CREAT, 0600);
  if (!fd) {
    if (path_exists(done))
      return make_error(errc::wrong_state, "spool " + spool_id + " is complete already");
    return make_error(fd.error());
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0)
    return make_error(errno_status("cannot stat " + part.string()));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (offset != size)
    return make_error(errc::wrong_state, "spool " + spool_id + " holds " + std::to_string(size)
                                           + " bytes; a chunk at " + std::to_string(offset)
                                           + " does not follow them");
  if (size + bytes.size() > opts(self).spool_bytes_max)
    return make_error(errc::too_large, "an upload may hold at most "
                                         + std::to_string(opts(self).spool_bytes_max)
                                         + " bytes on this worker");
  for (size_t written = 0; written < bytes.size();) {
    const ssize_t put = ::pwrite(fd->get(), bytes.data() + written, bytes.size() - written,
                                 static_cast<off_t>(size + written));
    if (put < 0)
      return make_error(errno_status("cannot write " + part.string()));
    written += static_cast<size_t>(put);
  }
  if (last) {
    if (::fsync(fd->get()) != 0 || ::rename(part.c_str(), done.c_str()) != 0)
      return make_error(errno_status("cannot complete " + done.string()));
  }
  return size + bytes.size();
}

caf::result<actors::template_built> handle_template_build(self_ptr self,
                                                          const actors::template_build& build) {
  if (auto bad = check_name("template", build.worker_name))
    return bad;
  if (build.format == "recipe")
    return handle_recipe_build(self, build);
  if (auto bad = check_name("spool id", build.spool_id))
    return bad;
  auto format = parse_archive_format(build.format);
  if (!format)
    return make_error(format.error());
  auto rootfs = self->state.context.rootfs;
  if (!rootfs)
    return make_error(errc::unavailable, "this worker has no rootfs driver: no templates");
  auto [promise, start, watch] = join_build(self, build.worker_name);
  if (!start)
    return promise;
  watch->append("# " + build.format + " archive\n");
  image_template_request request;
  request.name = build.worker_name;
  request.archive = spool_dir(self) / build.spool_id;
  request.format = *format;
  if (build.compressed_bytes_max != 0)
    request.limits.compressed_bytes_max = build.compressed_bytes_max;
  if (build.uncompressed_bytes_max != 0)
    request.limits.uncompressed_bytes_max = build.uncompressed_bytes_max;
  if (build.entries_max != 0)
    request.limits.entries_max = build.entries_max;
  if (build.path_bytes_max != 0)
    request.limits.path_bytes_max = build.path_bytes_max;
  request.start_cmd = build.start_cmd;
  off_the_node<actors::template_built>(
    self,
    [rootfs, request, watch]() -> result<actors::template_built> {
      if (!rootfs->has_template(request.name) && !path_exists(request.archive))
        return make_status(errc::not_found, "no uploaded archive "
                                              + request.archive.filename().string()
                                              + " on this worker: upload it again");
      auto built = build_image_template(
        *rootfs, request, [watch](const import_progress& at) { report_import(*watch, at); });
      (void)::unlink(request.archive.c_str()); // made or refused: not needed again
      if (!built)
        return built.error();
      return to_built(*built);
    },
    [self, name = build.worker_name](actors::template_built& built) {
      self->state.ready_templates.erase(name); // learnt again, start_cmd included
      end_build(self, name, built);
    },
    [self, name = build.worker_name](caf::error& error) {
      end_build(self, name, to_status(error));
    });
  return promise;
}

joined_build join_build(self_ptr self, const std::string& name) {
  auto promise = self->make_response_promise<actors::template_built>();
  auto [build, fresh] = self->state.image_builds.try_emplace(name);
  build->second.waiting.push_back(promise);
  return {promise, fresh, build->second.watch};
}

void end_build(self_ptr self, const std::string& name,
               const result<actors::template_built>& ended) {
  auto found = self->state.image_builds.find(name);
  if (found == self->state.image_builds.end())
    return;
  auto build = std::move(found->second);
  self->state.image_builds.erase(found);
  auto outcome = ended;
  if (!outcome && build.watch->cancelled())
    outcome = make_status(errc::cancelled, "the build of " + name + " was cancelled");
  build.watch->set_step(outcome ? "done" : "failed", outcome ? 100 : -1);
  build.watch->append(outcome ? "# done\n" : "# " + outcome.error().message + "\n");
  if (auto rootfs = self->state.context.rootfs)
    (void)build.watch->save_log(build_log_path(rootfs->templates_dir(), name)); // best effort
  for (auto& call : build.waiting)
    if (outcome)
      call.deliver(*outcome);
    else
      call.deliver(make_error(outcome.error()));
}

caf::result<actors::template_progress> handle_template_watch(self_ptr self, const std::string& name,
                                                             uint64_t log_offset, bool cancel) {
  if (auto bad = check_name("template", name))
    return bad;
  if (auto live = self->state.image_builds.find(name); live != self->state.image_builds.end()) {
    auto& build = live->second;
    if (cancel && !build.watch->cancelled()) {
      build.watch->cancel();
      build.watch->append("# cancelled on request\n");
      if (build.on_cancel)
        build.on_cancel();
    }
    return build.watch->read(log_offset);
  }
  // A first build is shared by the creates waiting for it: never cancelled.
  if (auto first = self->state.builds.find(name); first != self->state.builds.end())
    return first->second.watch->read(log_offset);
  auto rootfs = self->state.context.rootfs;
  if (!rootfs)
    return make_error(errc::not_found, "this worker has no templates");
  auto saved = read_saved_log(build_log_path(rootfs->templates_dir(), name), log_offset);
  if (!saved)
    return make_error(errc::not_found, "no build of " + name + " on this worker kept a log");
  return *saved;
}

caf::result<bool> handle_template_delete(self_ptr self, const std::string& worker_name) {
  if (auto bad = check_name("template", worker_name))
    return bad;
  auto rootfs = self->state.context.rootfs;
  if (!rootfs)
    return true;
  self->state.ready_templates.erase(worker_name);
  auto promise = self->make_response_promise<bool>();
  off_the_node<bool>(
    self,
    [rootfs, worker_name]() -> result<bool> {
      if (auto deleted = rootfs->delete_template(worker_name); !deleted)
        return deleted;
      (void)::unlink(build_log_path(rootfs->templates_dir(), worker_name).c_str());
      return true;
    },
    [promise](bool& done) mutable { promise.deliver(done); },
    [promise](caf::error& error) mutable { promise.deliver(std::move(error)); });
  return promise;
}

} // namespace airlock::worker::node_detail
