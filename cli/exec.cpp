// airlock exec: start a process, stream its output (resuming after a dropped
// connection), feed it stdin, and exit with its status.

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <thread>

#include "cli/base64.hpp"
#include "cli/commands.hpp"
#include "cli/sse.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::cli {

namespace {

using nlohmann::json;

/// Where a process's data-plane routes live and the token they take.
struct attachment {
  std::string url; ///< absolute attach_url
  std::string token;
  http_client_options http; ///< trusting the worker CA when the URL is a worker's https one

  http_request request(std::string method, const std::string& suffix, std::string body = {}) const {
    return {
      std::move(method), url + suffix, {{"Authorization", "Bearer " + token}}, std::move(body)};
  }
};

struct process_exit {
  std::optional<int> exit_code;
  std::optional<int> signal;
};

/// The local terminal for -t: its size, raw mode while the process runs,
/// restored on every way out.
class terminal {
public:
  explicit terminal(int fd) : fd_(fd >= 0 && ::isatty(fd) ? fd : -1) {}
  ~terminal() { restore(); }
  terminal(const terminal&) = delete;
  terminal& operator=(const terminal&) = delete;

  /// rows, cols; 24x80 when there is no terminal to ask.
  std::pair<int, int> size() const {
    winsize size{};
    if (fd_ >= 0 && ::ioctl(fd_, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 && size.ws_col > 0)
      return {size.ws_row, size.ws_col};
    return {24, 80};
  }
  bool present() const { return fd_ >= 0; }

  void enter_raw() {
    if (fd_ < 0 || ::tcgetattr(fd_, &saved_) != 0)
      return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    raw_ = ::tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
  void restore() {
    if (raw_)
      ::tcsetattr(fd_, TCSANOW, &saved_);
    raw_ = false;
  }

private:
  int fd_;
  bool raw_ = false;
  termios saved_{};
};

/// The write end of the pipe SIGWINCH pokes. A signal handler can reach only
/// globals; this is the one piece of global state of the CLI, set only while
/// exec -t runs on a terminal.
std::atomic<int> winch_fd{-1};

extern "C" void on_winch(int) {
  int fd = winch_fd.load();
  if (fd >= 0) {
    [[maybe_unused]] auto written = ::write(fd, "w", 1);
  }
}

/// A pipe with both ends non-blocking and close-on-exec.
struct pipe_pair {
  unique_fd read;
  unique_fd write;
  pipe_pair() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      read.reset(fds[0]);
      write.reset(fds[1]);
    }
  }
  void drain() const {
    char bytes[64];
    while (::read(read.get(), bytes, sizeof bytes) > 0) {
    }
  }
};

/// Copies our stdin to the process (POST .../stdin, then .../stdin/close at
/// its end) and, with a terminal, window size changes (POST .../resize), on
/// a thread of its own until stop().
class input_pump {
public:
  input_pump(context& ctx, attachment attach, terminal* tty)
      : ctx_(ctx), attach_(std::move(attach)), tty_(tty) {
    if (tty_ && tty_->present()) {
      winch_fd.store(winch_.write.get());
      struct sigaction action {};
      action.sa_handler = on_winch;
      ::sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      watching_winch_ = ::sigaction(SIGWINCH, &action, &saved_winch_) == 0;
    }
    thread_ = std::thread([this] { run(); });
  }
  ~input_pump() { stop(); }
  input_pump(const input_pump&) = delete;
  input_pump& operator=(const input_pump&) = delete;

  void stop() {
    if (!thread_.joinable())
      return;
    stopping_.store(true);
    [[maybe_unused]] auto written = ::write(wake_.write.get(), "s", 1);
    thread_.join();
    if (watching_winch_)
      ::sigaction(SIGWINCH, &saved_winch_, nullptr);
    winch_fd.store(-1);
  }

private:
  void run() {
    if (ctx_.io.in_fd >= 0)
      pump_descriptor();
    else
      pump_stream();
  }

  /// False once the process no longer takes input (it ended or closed stdin).
  bool send(const std::string& suffix, std::string body) {
    auto sent = http_send(attach_.request("POST", suffix, std::move(body)), attach_.http);
    return sent && sent->status >= 200 && sent->status < 300;
  }

  void pump_stream() {
    std::string chunk(ctx_.options.stdin_chunk_bytes, '\0');
    while (!stopping_.load()) {
      ctx_.io.in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      auto got = static_cast<size_t>(ctx_.io.in.gcount());
      if (got > 0 && !send("/stdin", chunk.substr(0, got)))
        return;
      if (!ctx_.io.in)
        break;
    }
    if (!stopping_.load())
      send("/stdin/close", {});
  }

  void pump_descriptor() {
    std::string chunk(ctx_.options.stdin_chunk_bytes, '\0');
    pollfd fds[3] = {
      {ctx_.io.in_fd, POLLIN, 0}, {wake_.read.get(), POLLIN, 0}, {winch_.read.get(), POLLIN, 0}};
    while (!stopping_.load()) {
      if (::poll(fds, 3, -1) < 0) {
        if (errno == EINTR)
          continue;
        return;
      }
      if (fds[1].revents != 0)
        return;
      if (fds[2].revents != 0) {
        winch_.drain();
        auto [rows, cols] = tty_->size();
        send("/resize", json{{"rows", rows}, {"cols", cols}}.dump());
      }
      if (fds[0].revents == 0)
        continue;
      ssize_t got = ::read(ctx_.io.in_fd, chunk.data(), chunk.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (got <= 0) {
        send("/stdin/close", {});
        fds[0].fd = -1; // keep following resizes until stopped
        continue;
      }
      if (!send("/stdin", chunk.substr(0, static_cast<size_t>(got))))
        fds[0].fd = -1;
    }
  }

  context& ctx_;
  attachment attach_;
  terminal* tty_;
  pipe_pair wake_;
  pipe_pair winch_;
  bool watching_winch_ = false;
  struct sigaction saved_winch_ {};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

/// One output event written where it belongs; false for a malformed one.
bool write_chunk(context& ctx, const sse_event& event) {
  auto doc = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("data") || !doc["data"].is_string())
    return false;
  std::string bytes = doc["data"].get<std::string>();
  if (doc.value("encoding", "") == "base64") {
    auto decoded = base64_decode(bytes);
    if (!decoded)
      return false;
    bytes = std::move(*decoded);
  }
  std::ostream& out = event.event == "stderr" ? ctx.io.err : ctx.io.out;
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  return true;
}

std::optional<int> optional_int(const json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_integer())
    return std::nullopt;
  return it->get<int>();
}

/// What one connection to .../output ended with.
struct stream_end {
  std::optional<process_exit> exit;
  std::optional<status> failure; ///< fatal: do not reconnect
  bool progressed = false;       ///< delivered at least one chunk
};

stream_end read_output(context& ctx, const attachment& attach, std::string& last_id,
                       std::optional<http_response>& answer) {
  stream_end end;
  sse_parser parser;
  auto request = attach.request("GET", "/output");
  request.headers.emplace_back("Accept", "text/event-stream");
  if (!last_id.empty())
    request.headers.emplace_back("Last-Event-ID", last_id);
  bool server_dropped = false;
  auto on_event = [&](const sse_event& event) {
    if (end.exit || end.failure || server_dropped)
      return;
    if (event.event == "stdout" || event.event == "stderr") {
      if (!write_chunk(ctx, event))
        end.failure = make_status(errc::internal, "the server sent a malformed output event");
      last_id = event.id;
      end.progressed = true;
    } else if (event.event == "exit") {
      auto doc = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
      end.exit = doc.is_object()
                   ? process_exit{optional_int(doc, "exit_code"), optional_int(doc, "signal")}
                   : process_exit{};
    } else if (event.event == "error") {
      server_dropped = true; // e.g. slow_consumer: reconnect and resume
    }
  };
  auto response = http_stream(request, attach.http, [&](std::string_view bytes) {
    if (auto fed = parser.feed(bytes, on_event); !fed)
      end.failure = fed;
    return !end.exit && !end.failure && !server_dropped;
  });
  if (response)
    answer = *response;
  return end;
}

/// After output was lost (410): the exit status from GET {attach_url}?wait=.
result<process_exit> wait_exit(const attachment& attach) {
  for (;;) {
    auto response = http_send(attach.request("GET", "?wait=60"), attach.http);
    if (!response)
      return connection_failure(response.error(), attach.url);
    if (response->status != 200)
      return api_failure(response->status, response->body);
    auto doc = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_object() && doc.value("state", "") == "exited")
      return process_exit{optional_int(doc, "exit_code"), optional_int(doc, "signal")};
  }
}

/// Streams output until the exit event, reconnecting with Last-Event-ID.
result<process_exit> follow_output(context& ctx, const attachment& attach) {
  std::string last_id;
  uint32_t fruitless = 0;
  for (;;) {
    std::optional<http_response> answer;
    auto end = read_output(ctx, attach, last_id, answer);
    if (end.exit)
      return *end.exit;
    if (end.failure)
      return *end.failure;
    if (answer && answer->status == 410) {
      ctx.io.err << "airlock: the server no longer holds the output after byte " << last_id
                 << "; waiting for the process to exit\n";
      return wait_exit(attach);
    }
    if (answer && (answer->status < 200 || answer->status >= 300))
      return api_failure(answer->status, answer->body);
    fruitless = end.progressed ? 0 : fruitless + 1;
    if (fruitless > ctx.options.reconnect_attempts_max)
      return make_status(errc::unavailable,
                         "lost the process's output stream and could not resume it after "
                           + std::to_string(ctx.options.reconnect_attempts_max)
                           + " attempts\nhint: is the sandbox's worker reachable at " + attach.url
                           + "?");
    std::this_thread::sleep_for(std::chrono::milliseconds(ctx.options.reconnect_delay_ms));
  }
}

json process_body(context& ctx, const terminal& tty, bool want_tty, bool want_stdin) {
  json body = {{"argv", ctx.inv.argv}, {"stdin", want_stdin}};
  if (ctx.inv.has("env"))
    body["env"] = ctx.inv.pairs("env");
  if (auto cwd = ctx.inv.value("cwd"))
    body["cwd"] = *cwd;
  if (auto user = ctx.inv.value("user"))
    body["user"] = *user;
  if (want_tty) {
    auto [rows, cols] = tty.size();
    body["pty"] = {{"rows", rows}, {"cols", cols}};
  }
  return body;
}

/// How to reach an attach URL: as the control plane, or, for a worker's own
/// https listener, trusting the cluster's worker CA (GET /v1/cluster/ca):
/// only for that URL, so a worker's certificate never passes for the
/// control plane.
result<http_client_options> attach_options(context& ctx, const std::string& attach_url) {
  http_client_options options = ctx.api.http();
  if (!attach_url.starts_with("https://") || attach_url.starts_with(ctx.api.config().url + "/"))
    return options;
  http_request request;
  request.url = ctx.api.absolute("/v1/cluster/ca");
  auto ca = ctx.api.send(request);
  if (!ca)
    return ca.error();
  if (ca->status != 200)
    return api_failure(ca->status, ca->body);
  options.ca_pem = ca->body;
  return options;
}

} // namespace

int run_exec(context& ctx) {
  bool want_tty = ctx.inv.has("tty");
  bool want_stdin = want_tty || ctx.inv.has("stdin");
  terminal tty(want_tty ? ctx.io.tty_fd : -1);
  json body = process_body(ctx, tty, want_tty, want_stdin);
  auto created = ctx.api.call(
    "POST", "/v1/sandboxes/" + url_encode(ctx.inv.positionals[0]) + "/processes", &body);
  if (!created)
    return report(ctx, created.error());
  attachment attach{
    ctx.api.absolute(created->value("attach_url", "")), created->value("attach_token", ""), {}};
  if (attach.url.empty() || attach.token.empty())
    return report(ctx, make_status(errc::internal, "the server's answer names no attach_url"));
  auto reach = attach_options(ctx, attach.url);
  if (!reach)
    return report(ctx, reach.error());
  attach.http = std::move(*reach);

  std::optional<input_pump> input;
  if (want_tty)
    tty.enter_raw();
  if (want_stdin)
    input.emplace(ctx, attach, want_tty ? &tty : nullptr);
  auto ended = follow_output(ctx, attach);
  input.reset();
  tty.restore();
  if (!ended)
    return report(ctx, ended.error());
  return exit_code_of(ended->exit_code, ended->signal);
}

} // namespace airlock::cli
