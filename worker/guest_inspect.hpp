#pragma once
// inspect() of the guest protocol's values (guest/protocol.hpp), so that the
// guest link hands guest messages to the sandbox actor as message values.
// They live here, at the worker's edge, because guest/ does not know CAF.

#include <caf/meta/type_name.hpp>

#include "actors/inspect_fields.hpp"
#include "guest/protocol.hpp"

namespace airlock::guest {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, limits_info& x) {
  return f(caf::meta::type_name("limits_info"), x.frame_bytes_max, x.streams_max, x.processes_max,
           x.path_bytes_max, x.file_chunk_bytes, x.output_chunk_bytes, x.window_bytes,
           x.window_bytes_max, x.stdin_window_bytes, x.list_entries_max);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hello& x) {
  return f(caf::meta::type_name("hello"), x.protocol_version, x.limits, x.pid, x.agent_version);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, started& x) {
  return f(caf::meta::type_name("started"), x.stream_id, x.pid, x.pty_path);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_chunk& x) {
  return f(caf::meta::type_name("output_chunk"), x.stream_id, x.fd, x.sequence, x.offset, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exited& x) {
  return f(caf::meta::type_name("exited"), x.stream_id, x.exit_code, x.signal, x.stdout_bytes,
           x.stderr_bytes, x.buffered_bytes_max);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, credit_grant& x) {
  return f(caf::meta::type_name("credit_grant"), x.stream_id, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_info& x) {
  return f(caf::meta::type_name("file_info"), x.name, x.type, x.size, x.mode, x.uid, x.gid,
           x.mtime_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_data& x) {
  return f(caf::meta::type_name("file_data"), x.request_id, x.offset, x.bytes, x.eof);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_stat& x) {
  return f(caf::meta::type_name("file_stat"), x.request_id, x.info);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_list& x) {
  return f(caf::meta::type_name("file_list"), x.request_id, x.entries, x.truncated);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_done& x) {
  return f(caf::meta::type_name("file_done"), x.request_id, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, error_reply& x) {
  return f(caf::meta::type_name("error_reply"), x.stream_id, x.request_id, x.code, x.message,
           x.ended, x.watch_id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, watch_started& x) {
  return f(caf::meta::type_name("watch_started"), x.watch_id, x.directories);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, watch_event& x) {
  return f(caf::meta::type_name("watch_event"), x.name, x.kind);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, watch_events& x) {
  return f(caf::meta::type_name("watch_events"), x.watch_id, x.events);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pong& x) {
  return f(caf::meta::type_name("pong"), x.nonce);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, refreshed& x) {
  return f(caf::meta::type_name("refreshed"), x.request_id, x.clock_step_ns, x.stream_id_max);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stats_reply& x) {
  return f(caf::meta::type_name("stats_reply"), x.request_id, x.processes_started,
           x.processes_running, x.reaped_total, x.orphans_reaped, x.open_streams, x.outbound_bytes,
           x.outbound_bytes_max, x.stream_buffered_bytes_max, x.frames_received, x.frames_sent);
}

} // namespace airlock::guest
