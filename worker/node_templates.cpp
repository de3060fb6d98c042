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
  auto [promise, start] = join_build(self, build.worker_name);
  if (!start)
    return promise;
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
  auto options = self->state.context.templates;
  off_the_node<actors::template_built>(
    self,
    [rootfs, options, request]() -> result<actors::template_built> {
      if (!rootfs->has_template(request.name) && !path_exists(request.archive))
        return make_status(errc::not_found, "no uploaded archive "
                                              + request.archive.filename().string()
                                              + " on this worker: upload it again");
      auto built = build_image_template(*rootfs, options, request);
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

std::pair<caf::typed_response_promise<actors::template_built>, bool>
join_build(self_ptr self, const std::string& name) {
  auto promise = self->make_response_promise<actors::template_built>();
  auto [waiting, fresh] = self->state.image_builds.try_emplace(name);
  waiting->second.push_back(promise);
  return {promise, fresh};
}

void end_build(self_ptr self, const std::string& name,
               const result<actors::template_built>& outcome) {
  auto found = self->state.image_builds.find(name);
  if (found == self->state.image_builds.end())
    return;
  auto waiting = std::move(found->second);
  self->state.image_builds.erase(found);
  for (auto& call : waiting)
    if (outcome)
      call.deliver(*outcome);
    else
      call.deliver(make_error(outcome.error()));
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
      return true;
    },
    [promise](bool& done) mutable { promise.deliver(done); },
    [promise](caf::error& error) mutable { promise.deliver(std::move(error)); });
  return promise;
}

} // namespace airlock::worker::node_detail
