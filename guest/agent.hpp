#pragma once
// guest_agent: the protocol server that runs as PID 1 inside a sandbox. One
// thread, one poll loop over the host channel, a signalfd and the stdio of
// the processes it started. It never blocks on the host or on a process's
// pipes; it blocks only on fork/exec (until execve succeeds) and on short
// disk calls for file operations.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "guest/frame.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::guest {

/// Limits and timings of one agent. Every buffer the agent keeps is bounded by
/// one of these; docs/guest-protocol.md lists what each bounds.
struct agent_options {
  /// Largest frame either side may send. Default: 1 MiB.
  size_t frame_bytes_max = frame_bytes_max_default;
  /// Processes plus file transfers open at once. Default: 64.
  uint32_t streams_max = 64;
  /// Started processes not yet reaped. Default: 64.
  uint32_t processes_max = 64;
  /// Longest path accepted by file operations and as a cwd. Default: 4096 bytes.
  size_t path_bytes_max = 4096;
  /// Bytes per file_data chunk of a read. Default: 256 KiB.
  size_t file_chunk_bytes = size_t{256} * 1024;
  /// Most bytes read from a process's pipe into one output frame. Default: 64 KiB.
  size_t output_chunk_bytes = size_t{64} * 1024;
  /// Output credit per process unless its start asks otherwise. Default: 256 KiB.
  uint32_t window_bytes = uint32_t{256} * 1024;
  /// Largest output window a start may ask for. Default: 8 MiB.
  uint32_t window_bytes_max = uint32_t{8} * 1024 * 1024;
  /// Stdin bytes the host may send before the guest returns credit. Default: 256 KiB.
  uint32_t stdin_window_bytes = uint32_t{256} * 1024;
  /// Entries in one list reply. Default: 4096.
  uint32_t list_entries_max = 4096;
  /// The agent stops reading the host while more than this waits to be sent,
  /// so replies cannot pile up without bound. Default: 4 MiB.
  size_t outbound_pause_bytes = size_t{4} * 1024 * 1024;
  /// File reads produce chunks only while less than this waits to be sent.
  /// Default: 1 MiB.
  size_t file_read_outbound_bytes = size_t{1024} * 1024;
  /// After a process exits, how long descendants may hold its output open
  /// before the agent closes it and reports the exit. Default: 250 ms.
  int exit_drain_ms = 250;
  /// After SIGTERM/SIGINT, how long processes get before SIGKILL. Default: 2000 ms.
  int shutdown_grace_ms = 2000;
  /// Directory depth a recursive remove descends. Default: 256.
  int remove_depth_max = 256;
  /// Directory watches open at once; a start beyond it is resource_exhausted.
  /// Default: 32.
  uint32_t watches_max = 32;
  /// Directories one recursive watch covers; a start over it fails, and a
  /// watch that grows past it ends, with resource_exhausted. Default: 4096.
  uint32_t watch_dirs_max = 4096;
  /// Kernel pipe size for stdout/stderr; 0 keeps the default. Default: 1 MiB.
  int pipe_bytes = 1 << 20;
  /// This long after start the agent makes later faults of its binary read
  /// single pages and drops the binary's page cache that nothing maps (see
  /// page_cache.hpp), so an idle sandbox is charged only for the pages the
  /// agent maps. Later than start-up, so that creating a sandbox stays as
  /// fast as before. 0: never. Default: 1000 ms.
  int page_cache_trim_ms = 1000;
  /// Reported in hello. Default: "dev".
  std::string agent_version = "dev";
};

/// Why run() returned; main turns it into the exit status.
enum class agent_exit : uint8_t {
  host_closed = 0,    ///< the host closed the channel
  terminated = 1,     ///< SIGTERM or SIGINT, processes stopped
  protocol_error = 2, ///< the host broke the protocol (oversized or corrupt frame)
  failed = 3,         ///< the agent could not set itself up
};

class guest_agent {
public:
  /// Takes the connected channel. Precondition: options are consistent
  /// (check_options returned ok).
  guest_agent(unique_fd channel, agent_options options);
  ~guest_agent();
  guest_agent(const guest_agent&) = delete;
  guest_agent& operator=(const guest_agent&) = delete;

  /// Serves the channel until it closes, a protocol error, or a termination
  /// signal. Blocks SIGCHLD, SIGTERM, SIGINT and SIGHUP and reads them from a
  /// signalfd; becomes a child subreaper when it is not PID 1. On return every
  /// process it started has been killed and reaped (bounded by the grace time).
  agent_exit run();

private:
  struct state;
  std::unique_ptr<state> state_;
};

/// invalid_argument when limits contradict each other (a chunk larger than a frame).
status check_options(const agent_options& options);

} // namespace airlock::guest
