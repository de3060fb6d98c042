#pragma once
// The host <-> guest protocol as C++ values, and the one place that turns them
// into Cap'n Proto frames (schema/guest.capnp) and back. Both the agent and
// guest_client use it; no Cap'n Proto reader escapes this codec, and a KJ
// exception from a malformed frame becomes a status here. The codec is in
// host_message_codec.cpp, guest_message_codec.cpp and start_request_codec.cpp.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "schema/cluster.hpp"
#include "schema/errc.hpp"

namespace airlock::guest {

/// Version the agent and client speak; sent in every envelope's schemaVersion.
inline constexpr uint16_t protocol_version = 1;

// ---- host -> guest ----------------------------------------------------------

/// Starts `process` on a new stream. The process request is the one the API
/// and the worker use; the guest reads of it what the start message carries
/// (argv or cmd, the whole env, cwd, run_as, pty and its size, stdin_open);
/// `user`, `timeout_s` and `report_start_failure` are the worker's business
/// and do not travel.
struct start_request {
  uint32_t stream_id = 0;
  schema::exec_spec process;
  uint32_t window_bytes = 0; ///< 0: the guest's default window
};

struct stdin_data {
  uint32_t stream_id = 0;
  std::string bytes;
};

struct close_stdin {
  uint32_t stream_id = 0;
};

struct signal_request {
  uint32_t stream_id = 0;
  int32_t signo = 0;
  bool group = false;
};

struct resize_request {
  uint32_t stream_id = 0;
  uint16_t rows = 0;
  uint16_t cols = 0;
};

/// Output credit (host -> guest) or stdin credit (guest -> host).
struct credit_grant {
  uint32_t stream_id = 0;
  uint32_t bytes = 0;
};

struct file_read_request {
  uint32_t request_id = 0;
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0; ///< 0: to the end
};

struct write_begin {
  uint32_t request_id = 0;
  std::string path;
  uint32_t mode = 0; ///< 0: 0644
  bool create_parents = false;
};

struct write_chunk {
  uint32_t request_id = 0;
  std::string bytes;
};

struct write_end {
  uint32_t request_id = 0;
  bool abort = false;
};

struct list_request {
  uint32_t request_id = 0;
  std::string path;
};

struct stat_request {
  uint32_t request_id = 0;
  std::string path;
  bool follow_symlinks = false;
};

struct mkdir_request {
  uint32_t request_id = 0;
  std::string path;
  uint32_t mode = 0; ///< 0: 0755
  bool parents = false;
};

struct remove_request {
  uint32_t request_id = 0;
  std::string path;
  bool recursive = false;
};

struct rename_request {
  uint32_t request_id = 0;
  std::string from;
  std::string to;
};

struct ping_request {
  uint64_t nonce = 0;
};

struct stats_request {
  uint32_t request_id = 0;
};

/// Starts watching directory `path` (absolute) with inotify; the guest
/// answers watch_started, then watch_events, or an error_reply naming
/// `watch_id` that ends the watch.
struct watch_start {
  uint32_t watch_id = 0; ///< nonzero, unique among open watches
  std::string path;
  bool recursive = false; ///< subdirectories too, present and future
};

/// Stops a watch; the guest forgets it (no reply). Unknown ids are ignored.
struct watch_stop {
  uint32_t watch_id = 0;
};

/// After a restore from a memory snapshot: fresh entropy, the host's wall
/// clock and optionally a new hostname (schema/guest.capnp, GuestRefresh).
/// The guest answers `refreshed` then a new `hello`, or an error_reply.
struct refresh_request {
  uint32_t request_id = 0;
  std::string entropy;     ///< at most refresh_entropy_bytes_max
  int64_t realtime_ns = 0; ///< 0: leave the clock
  std::string hostname;    ///< "": keep
  /// eth0's new "ADDRESS/PREFIX,GATEWAY" (a restored VM is wired to a new
  /// slot); "": keep.
  std::string network;
};
inline constexpr size_t refresh_entropy_bytes_max = 4096;

using host_message =
  std::variant<start_request, stdin_data, close_stdin, signal_request, resize_request, credit_grant,
               file_read_request, write_begin, write_chunk, write_end, list_request, stat_request,
               mkdir_request, remove_request, rename_request, ping_request, stats_request,
               watch_start, watch_stop, refresh_request>;

// ---- guest -> host ----------------------------------------------------------

/// The limits an agent enforces; announced in hello so the host can respect them.
struct limits_info {
  uint32_t frame_bytes_max = 0;
  uint32_t streams_max = 0;
  uint32_t processes_max = 0;
  uint32_t path_bytes_max = 0;
  uint32_t file_chunk_bytes = 0;
  uint32_t output_chunk_bytes = 0;
  uint32_t window_bytes = 0;
  uint32_t window_bytes_max = 0;
  uint32_t stdin_window_bytes = 0;
  uint32_t list_entries_max = 0;
};

struct hello {
  uint16_t protocol_version = 0;
  limits_info limits;
  int32_t pid = 0;
  std::string agent_version;
};

struct started {
  uint32_t stream_id = 0;
  int32_t pid = 0;
  std::string pty_path;
};

struct output_chunk {
  uint32_t stream_id = 0;
  uint8_t fd = 1;
  uint64_t sequence = 0;
  uint64_t offset = 0;
  std::string bytes;
};

struct exited {
  uint32_t stream_id = 0;
  int32_t exit_code = 0; ///< -1 when killed by a signal
  int32_t signal = 0;
  uint64_t stdout_bytes = 0;
  uint64_t stderr_bytes = 0;
  uint64_t buffered_bytes_max = 0;
};

enum class file_type : uint8_t { other = 0, regular = 1, directory = 2, symlink = 3 };

struct file_info {
  std::string name;
  file_type type = file_type::other;
  uint64_t size = 0;
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  int64_t mtime_ns = 0;
  std::string owner;          ///< the uid's name in the sandbox's /etc/passwd, else the uid
  std::string group;          ///< the gid's name in its /etc/group, else the gid
  std::string symlink_target; ///< a symlink's target, absolute; empty otherwise
};

struct file_data {
  uint32_t request_id = 0;
  uint64_t offset = 0;
  std::string bytes;
  bool eof = false;
};

struct file_stat {
  uint32_t request_id = 0;
  file_info info;
};

struct file_list {
  uint32_t request_id = 0;
  std::vector<file_info> entries;
  bool truncated = false;
};

struct file_done {
  uint32_t request_id = 0;
  uint64_t bytes = 0;
};

/// A failure about a stream, a request or (both ids 0) the channel itself.
struct error_reply {
  uint32_t stream_id = 0;
  uint32_t request_id = 0;
  errc code = errc::internal;
  std::string message;
  bool ended = false;    ///< no further message carries this id
  uint32_t watch_id = 0; ///< nonzero: about this watch (ids above are 0)
};

struct pong {
  uint64_t nonce = 0;
};

struct stats_reply {
  uint32_t request_id = 0;
  uint64_t processes_started = 0;
  uint32_t processes_running = 0;
  uint64_t reaped_total = 0;
  uint64_t orphans_reaped = 0;
  uint32_t open_streams = 0;
  uint64_t outbound_bytes = 0;
  uint64_t outbound_bytes_max = 0;
  uint64_t stream_buffered_bytes_max = 0;
  uint64_t frames_received = 0;
  uint64_t frames_sent = 0;
};

/// The watch is in place: every change from now on is reported.
struct watch_started {
  uint32_t watch_id = 0;
  uint32_t directories = 0; ///< directories watched (1 unless recursive)
};

/// What happened, as E2B's envd reports it (fsnotify's mapping of inotify).
enum class watch_kind : uint8_t {
  create = 0, ///< IN_CREATE, IN_MOVED_TO
  write = 1,  ///< IN_MODIFY
  remove = 2, ///< IN_DELETE
  rename = 3, ///< IN_MOVED_FROM
  chmod = 4,  ///< IN_ATTRIB
};

/// "create", "write", "remove", "rename", "chmod".
std::string_view to_string(watch_kind kind) noexcept;

struct watch_event {
  std::string name; ///< relative to the watched directory ("sub/f.txt")
  watch_kind kind = watch_kind::create;
  bool operator==(const watch_event&) const = default;
};

/// Changes under one watch, in the order inotify reported them.
struct watch_events {
  uint32_t watch_id = 0;
  std::vector<watch_event> events;
};

/// The refresh is done: entropy credited, the CRNG reseeded, the clock set.
struct refreshed {
  uint32_t request_id = 0;
  int64_t clock_step_ns = 0; ///< new CLOCK_REALTIME minus the old one
  /// Highest stream id still open in the guest: a new session's streams
  /// must not reuse the ids of processes that ran on before the snapshot.
  uint32_t stream_id_max = 0;
};

/// Stdin credit travels as `credit_grant` too; the direction tells them apart.
using guest_message =
  std::variant<hello, started, output_chunk, exited, credit_grant, file_data, file_stat, file_list,
               file_done, error_reply, pong, stats_reply, watch_started, watch_events, refreshed>;

// ---- codec --------------------------------------------------------------------

/// Appends one length-prefixed frame holding `message` to `out`.
void append_frame(std::string& out, const host_message& message);
void append_frame(std::string& out, const guest_message& message);

/// Appends an output frame without first copying `bytes` into an output_chunk:
/// the agent's hot path.
void append_output_frame(std::string& out, uint32_t stream_id, uint8_t fd, uint64_t sequence,
                         uint64_t offset, std::string_view bytes);

/// Frame payload of `message` (no length prefix); used by tests and size checks.
std::string encode_payload(const host_message& message);
std::string encode_payload(const guest_message& message);

/// Decodes one frame payload. Fails with corrupt_record when the bytes do not
/// decode, unsupported_version when the union member is unknown to this build.
result<host_message> decode_host_message(std::string_view payload);
result<guest_message> decode_guest_message(std::string_view payload);

/// errc names are read with airlock::errc_from_string (schema/errc.hpp).

} // namespace airlock::guest
