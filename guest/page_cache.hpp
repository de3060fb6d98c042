#pragma once
// The agent's own page cache. Every sandbox runs the same host file (the
// worker executes it from a descriptor), so its cached pages are shared; a
// page is charged to the cgroup that first reads it. Fault read-around reads
// far more of the file than the agent runs: asking for random access keeps
// what each sandbox reads to the pages it runs. Best effort: a failure
// changes memory, nothing else.

namespace airlock::guest {

/// MADV_RANDOM on the binary's loaded segments: later page faults read only
/// the page they need instead of a read-around window.
void advise_random_own_segments() noexcept;

} // namespace airlock::guest
