#pragma once
// The agent's own page cache. Each sandbox runs the agent from its own
// snapshot, and snapshots share no page cache, so every page the kernel reads
// of the binary is charged to that sandbox. Fault read-around (the loop
// device's read_ahead_kb: megabytes) reads far more of the file than the agent
// runs. These calls are best effort: a failure changes memory, nothing else.

namespace airlock::guest {

/// MADV_RANDOM on the binary's loaded segments: later page faults read only
/// the page they need instead of a read-around window.
void advise_random_own_segments() noexcept;

/// POSIX_FADV_DONTNEED on the binary: drops its cached pages that nothing
/// maps (pages still under read-ahead I/O survive; call again later for those).
void drop_own_page_cache() noexcept;

} // namespace airlock::guest
