// The node actor's translation between the cluster protocol's values
// (actors/cluster_protocol.hpp) and the worker's own: a sandbox record to a
// create request, an exec spec resolved for the sandbox actor (environment
// and user), process rows' actor-clock times to Unix ms, output replies to
// batches, file specs and replies to the API's.

#include <caf/stateful_actor.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/errors.hpp"
#include "actors/runtime_choice.hpp"
#include "worker/node_state.hpp"

namespace airlock::worker::node_detail {

create_sandbox_request to_create_request(const schema::sandbox_record& record) {
  create_sandbox_request req;
  req.id = record.id;
  req.template_name = worker_template_of(record.spec);
  req.limits.cpu_millis = record.spec.cpu_millis;
  req.limits.memory_mb = record.spec.memory_mb;
  req.limits.cpu_request_millis = record.spec.cpu_request_millis;
  req.disk_mb = record.spec.disk_mb;
  req.memory_request_mb = record.spec.memory_request_mb;
  req.disk_request_mb = record.spec.disk_request_mb;
  req.egress.tenant_id = record.tenant_id;
  req.egress.template_name = record.spec.template_name;
  req.egress.policy = record.spec.egress;
  req.from_snapshot = record.spec.from_checkpoint;
  req.runtime = actors::runtime_of(record.spec);
  return req;
}

namespace {

int64_t actor_now_ms(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

} // namespace

int64_t to_unix_ms(self_ptr self, int64_t actor_ms) {
  if (actor_ms == 0)
    return 0;
  return self->state.context.clock->now_ms() - (actor_now_ms(self) - actor_ms);
}

actors::process_view with_unix_times(self_ptr self, actors::process_view view) {
  view.started_at_ms = to_unix_ms(self, view.started_at_ms);
  view.ended_at_ms = schema::has_ended(view.state) ? to_unix_ms(self, view.ended_at_ms) : 0;
  return view;
}

namespace {

/// The environment of a process: PATH (and HOME when known), then the
/// sandbox's env, then the process's own; later ones win.
std::vector<std::pair<std::string, std::string>> merged_env(self_ptr self,
                                                            const std::string& sandbox_id,
                                                            const actors::exec_spec& spec,
                                                            const schema::process_user& user) {
  auto env = fixed_process_env(opts(self).default_path, user);
  if (auto it = self->state.sandboxes.find(sandbox_id); it != self->state.sandboxes.end())
    for (const auto& [key, value] : it->second.record.spec.env)
      env[key] = value;
  for (const auto& [key, value] : spec.env)
    env[key] = value;
  return {env.begin(), env.end()};
}

} // namespace

actors::exec_spec resolve_exec(self_ptr self, const std::string& sandbox_id, actors::exec_spec spec,
                               const schema::process_user& user) {
  spec.request_env = spec.env;
  spec.env = merged_env(self, sandbox_id, spec, user);
  spec.run_as = user;
  spec.report_start_failure = true;
  return spec;
}

actors::output_batch to_batch(output_reply& reply) {
  actors::output_batch batch;
  batch.segments.reserve(reply.pieces.size());
  for (auto& piece : reply.pieces)
    batch.segments.push_back(
      actors::output_segment{piece.fd, piece.end_offset, std::move(piece.bytes)});
  batch.next_offset = reply.next_offset;
  batch.start_offset = reply.start_offset;
  batch.exited = reply.exited;
  batch.exit_code = reply.exit_code;
  batch.signal = reply.signal;
  return batch;
}

namespace {

actors::file_entry to_entry(const guest::file_info& info) {
  actors::file_entry entry;
  entry.name = info.name;
  switch (info.type) {
    case guest::file_type::regular: entry.type = "file"; break;
    case guest::file_type::directory: entry.type = "dir"; break;
    case guest::file_type::symlink: entry.type = "symlink"; break;
    case guest::file_type::other: entry.type = "other"; break;
  }
  entry.size_bytes = info.size;
  entry.mode = info.mode;
  entry.modified_at_ms = info.mtime_ns / 1'000'000;
  entry.uid = info.uid;
  entry.gid = info.gid;
  // An older agent does not look names up: the ids as text, as for an id
  // without a name.
  entry.owner = info.owner.empty() ? std::to_string(info.uid) : info.owner;
  entry.group = info.group.empty() ? std::to_string(info.gid) : info.group;
  entry.symlink_target = info.symlink_target;
  return entry;
}

} // namespace

file_request to_file_request(actors::file_spec& spec) {
  file_request req;
  req.path = std::move(spec.path);
  switch (spec.verb) {
    case actors::file_verb::read:
      req.op = file_op::read;
      req.offset = spec.offset;
      req.length = spec.length;
      break;
    case actors::file_verb::write:
      req.op = file_op::write;
      req.data = std::move(spec.data);
      req.mode = spec.mode == 0 ? 0644 : spec.mode;
      req.parents = true; // the API creates parents
      break;
    case actors::file_verb::list: req.op = file_op::list; break;
    case actors::file_verb::stat: req.op = file_op::stat; break;
    case actors::file_verb::mkdir:
      req.op = file_op::mkdir;
      // file_spec's default mode (0644) is a file's; a directory gets 0755
      // unless the caller gave a mode with search bits.
      req.mode = (spec.mode & 0111) != 0 ? spec.mode : 0;
      req.parents = true;
      break;
    case actors::file_verb::remove:
      req.op = file_op::remove;
      req.recursive = spec.recursive;
      break;
    case actors::file_verb::rename:
      req.op = file_op::rename;
      req.to = std::move(spec.to);
      break;
    case actors::file_verb::write_open:
      req.op = file_op::write_open;
      req.mode = spec.mode == 0 ? 0644 : spec.mode;
      req.parents = true; // the API creates parents
      break;
    case actors::file_verb::write_part:
      req.op = file_op::write_part;
      req.session = spec.session;
      req.offset = spec.offset;
      req.data = std::move(spec.data);
      break;
    case actors::file_verb::write_commit:
      req.op = file_op::write_commit;
      req.session = spec.session;
      break;
    case actors::file_verb::write_abort:
      req.op = file_op::write_abort;
      req.session = spec.session;
      break;
  }
  return req;
}

actors::file_result to_file_result(file_reply& reply, const std::string& path) {
  actors::file_result out;
  out.data = std::move(reply.data);
  out.written = reply.bytes;
  out.session = reply.session;
  out.truncated = reply.truncated;
  out.entries.reserve(reply.entries.size());
  for (const auto& info : reply.entries)
    out.entries.push_back(to_entry(info));
  out.info = to_entry(reply.info);
  if (out.info.name.empty() && !reply.info.name.empty())
    out.info.name = reply.info.name;
  if (out.info.name.empty())
    out.info.name = path.substr(path.rfind('/') + 1);
  return out;
}

} // namespace airlock::worker::node_detail
