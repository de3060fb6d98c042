#include "guest/agent_state.hpp"
#include "guest/page_cache.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace airlock::guest {

namespace {

/// How long the agent tries to deliver its last messages, and to reap what it
/// killed, before it returns from run().
constexpr int final_flush_ms = 1000;
constexpr int final_reap_ms = 1000;

} // namespace

void guest_agent::state::finish() {
  if (exit_reason != agent_exit::terminated)
    signal_all(SIGKILL);
  auto deadline = now_ms() + final_reap_ms;
  while (!pid_streams.empty() && now_ms() < deadline) {
    pollfd p{signals.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, deadline - now_ms())));
    drain_signals();
  }
  writes.clear();
  if (exit_reason == agent_exit::host_closed)
    return;
  deadline = now_ms() + final_flush_ms;
  while (channel && outbound_bytes() > 0 && now_ms() < deadline) {
    pollfd p{channel.get(), POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, deadline - now_ms())));
    flush();
  }
}

void guest_agent::state::signal_all(int signo) {
  for (const auto& [pid, stream] : pid_streams)
    if (::kill(-pid, signo) != 0)
      ::kill(pid, signo);
}

void guest_agent::state::check_deadlines() {
  auto now = now_ms();
  if (page_cache_trim_at_ms != 0 && now >= page_cache_trim_at_ms) {
    advise_random_own_segments();
    page_cache_trim_at_ms = 0;
  }
  if (shutting_down)
    check_shutdown(now);
  std::vector<uint32_t> due;
  for (const auto& [id, p] : processes)
    if (p.reaped && p.outputs_open() && p.credit > 0 && now >= p.drain_deadline_ms)
      due.push_back(id);
  // A descendant still holds the output open: stop waiting for it.
  for (auto id : due) {
    auto& p = processes.at(id);
    p.out[0].fd.reset();
    p.out[1].fd.reset();
    maybe_finish(id);
  }
}

void guest_agent::state::check_shutdown(int64_t now) {
  if (pid_streams.empty() && processes.empty()) {
    exit_reason = agent_exit::terminated;
    return;
  }
  if (now < shutdown_deadline_ms)
    return;
  if (killed) {
    exit_reason = agent_exit::terminated; // what is still alive ignores SIGKILL; give up
    return;
  }
  signal_all(SIGKILL);
  if (::getpid() == 1)
    ::kill(-1, SIGKILL);
  killed = true;
  shutdown_deadline_ms = now + options.shutdown_grace_ms;
}

void guest_agent::state::drain_signals() {
  signalfd_siginfo info{};
  while (::read(signals.get(), &info, sizeof info) == sizeof info) {
    if ((info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) && !shutting_down)
      begin_shutdown();
  }
  reap_children();
}

void guest_agent::state::begin_shutdown() {
  shutting_down = true;
  shutdown_deadline_ms = now_ms() + options.shutdown_grace_ms;
  signal_all(SIGTERM);
}

void guest_agent::state::reap_children() {
  for (;;) {
    int wait_status = 0;
    pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
    if (pid <= 0)
      return;
    counters.reaped_total++;
    auto it = pid_streams.find(pid);
    if (it == pid_streams.end()) {
      counters.orphans_reaped++;
      continue;
    }
    auto id = it->second;
    pid_streams.erase(it);
    auto& p = processes.at(id);
    p.reaped = true;
    p.wait_status = wait_status;
    p.drain_deadline_ms = now_ms() + options.exit_drain_ms;
    maybe_finish(id);
  }
}

} // namespace airlock::guest
