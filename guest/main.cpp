// airlock-guest: PID 1 inside every sandbox. Serves the host <-> guest
// protocol on an inherited fd (--fd N) or on the first connection to a unix
// socket (--listen PATH). Exit status: 0 when the host closed the channel or a
// SIGTERM/SIGINT stopped it, 1 when it could not start, 2 on a protocol
// violation by the host, 64 on a usage error.

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "guest/agent.hpp"
#include "guest/guest_network.hpp"

namespace {

using airlock::unique_fd;
using airlock::guest::agent_exit;
using airlock::guest::agent_options;

constexpr int exit_usage = 64;
constexpr int exit_failed = 1;

struct command_line {
  int fd = -1;
  std::string listen_path;
  /// --net ADDRESS/PREFIX,GATEWAY (a microVM's /init, from airlock.net=).
  std::optional<airlock::guest::guest_network> network;
  agent_options options;
};

void usage() {
  std::fputs("usage: airlock-guest (--fd N | --listen PATH) [--streams-max N] "
             "[--processes-max N]\n"
             "         [--net ADDRESS/PREFIX,GATEWAY]\n"
             "         [--frame-bytes-max N] [--window-bytes N] [--output-chunk-bytes N]\n"
             "         [--exit-drain-ms N] [--pipe-bytes N] [--watches-max N]\n"
             "         [--watch-dirs-max N] [--outbound-pause-bytes N]\n",
             stderr);
}

template <class T>
bool parse_number(std::string_view text, T& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

/// Points a flag name at the option it sets; false for unknown flags.
bool set_number(std::string_view flag, std::string_view value, command_line& cl) {
  auto& o = cl.options;
  if (flag == "--fd")
    return parse_number(value, cl.fd);
  if (flag == "--streams-max")
    return parse_number(value, o.streams_max);
  if (flag == "--processes-max")
    return parse_number(value, o.processes_max);
  if (flag == "--frame-bytes-max")
    return parse_number(value, o.frame_bytes_max);
  if (flag == "--window-bytes")
    return parse_number(value, o.window_bytes);
  if (flag == "--output-chunk-bytes")
    return parse_number(value, o.output_chunk_bytes);
  if (flag == "--exit-drain-ms")
    return parse_number(value, o.exit_drain_ms);
  if (flag == "--pipe-bytes")
    return parse_number(value, o.pipe_bytes);
  if (flag == "--outbound-pause-bytes")
    return parse_number(value, o.outbound_pause_bytes);
  if (flag == "--watches-max")
    return parse_number(value, o.watches_max);
  if (flag == "--watch-dirs-max")
    return parse_number(value, o.watch_dirs_max);
  return false;
}

bool parse(int argc, char** argv, command_line& cl) {
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (i + 1 >= argc)
      return false;
    std::string_view value = argv[++i];
    if (flag == "--listen") {
      cl.listen_path = value;
    } else if (flag == "--net") {
      cl.network = airlock::guest::parse_guest_network(value);
      if (!cl.network)
        return false;
    } else if (!set_number(flag, value, cl)) {
      return false;
    }
  }
  return (cl.fd >= 0) != !cl.listen_path.empty();
}

/// Fds 0..2 must be taken before any pipe is made: a pipe landing on fd 1
/// would be clobbered when a child's stdio is set up with dup2.
void occupy_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0)
      continue;
    int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd < 0) {
      int fds[2];
      if (::pipe(fds) == 0 && fds[1] > 2)
        ::close(fds[1]);
      continue;
    }
    if (null_fd != fd) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
}

unique_fd bind_listener(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof address.sun_path) {
    std::fprintf(stderr, "airlock-guest: socket path too long: %s\n", path.c_str());
    return {};
  }
  address.sun_family = AF_UNIX;
  // Bound under a temporary name and renamed once listening: a host that
  // sees the path can connect at once instead of racing bind against listen.
  auto temp = path + ".tmp";
  if (temp.size() >= sizeof address.sun_path)
    temp = path;
  std::memcpy(address.sun_path, temp.c_str(), temp.size() + 1);
  unique_fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ::unlink(temp.c_str());
  if (!listener
      || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0
      || ::listen(listener.get(), 1) != 0
      || (temp != path && ::rename(temp.c_str(), path.c_str()) != 0)) {
    std::fprintf(stderr, "airlock-guest: listen on %s: %s\n", path.c_str(), std::strerror(errno));
    return {};
  }
  return listener;
}

/// Waits for the host's connection. Reaps children and honours SIGTERM and
/// SIGINT meanwhile: as PID 1 the agent must do both even before it serves.
unique_fd accept_host(const std::string& path) {
  auto listener = bind_listener(path);
  if (!listener)
    return {};
  sigset_t mask;
  sigemptyset(&mask);
  for (int signo : {SIGCHLD, SIGTERM, SIGINT, SIGHUP})
    sigaddset(&mask, signo);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  unique_fd signals(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  for (;;) {
    pollfd fds[2] = {{listener.get(), POLLIN, 0}, {signals.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR)
      return {};
    signalfd_siginfo info{};
    while (::read(signals.get(), &info, sizeof info) == sizeof info)
      if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT)
        return {};
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (fds[0].revents & POLLIN) {
      unique_fd connection(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (connection) {
        ::unlink(path.c_str());
        return connection;
      }
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  command_line cl;
  if (!parse(argc, argv, cl)) {
    usage();
    return exit_usage;
  }
  if (auto checked = airlock::guest::check_options(cl.options); !checked.is_ok()) {
    std::fprintf(stderr, "airlock-guest: %s\n", checked.message.c_str());
    return exit_usage;
  }
  occupy_standard_fds();
  // In a microVM the agent is the guest's init and sets its network up
  // before it serves: the host's first exec may already use it. A VM whose
  // network cannot be configured fails here, loudly on its console.
  if (cl.network) {
    if (auto configured = airlock::guest::configure_guest_network(*cl.network);
        !configured.is_ok()) {
      std::fprintf(stderr, "airlock-guest: %s\n", configured.message.c_str());
      return exit_failed;
    }
  }
  unique_fd channel = cl.fd >= 0 ? unique_fd(cl.fd) : accept_host(cl.listen_path);
  if (!channel)
    return exit_failed;
  airlock::guest::guest_agent agent(std::move(channel), cl.options);
  switch (agent.run()) {
    case agent_exit::host_closed:
    case agent_exit::terminated: return 0;
    case agent_exit::protocol_error: return 2;
    case agent_exit::failed: return exit_failed;
  }
  return exit_failed;
}
