#include "worker/microvm/qmp.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "worker/runtime/sys.hpp"

namespace airlock::worker::microvm {
namespace {

/// A QMP line never comes near this; a peer that sends more is not QMP.
constexpr size_t line_bytes_max = size_t{1} << 20;

int64_t now_ms() {
  return static_cast<int64_t>(worker::monotonic_ms()); // signed: deadlines are subtracted
}

status write_all(int fd, std::string_view bytes, int64_t deadline_ms) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return make_status(errc::unavailable, std::string("qmp: write: ") + std::strerror(errno));
    int64_t left = deadline_ms - now_ms();
    if (left <= 0)
      return make_status(errc::timeout, "qmp: write timed out");
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(left));
  }
  return status::ok();
}

/// One command as QMP's wire line; invalid_argument when the arguments are
/// not a JSON object.
result<std::string> request_line(std::string_view command, std::string_view arguments_json) {
  nlohmann::json request = {{"execute", command}};
  if (!arguments_json.empty()) {
    auto arguments = nlohmann::json::parse(arguments_json, nullptr, false);
    if (arguments.is_discarded() || !arguments.is_object())
      return make_status(errc::invalid_argument, "qmp: arguments are not a JSON object");
    request["arguments"] = std::move(arguments);
  }
  return request.dump() + "\n";
}

} // namespace

result<qmp_client> qmp_client::open(unique_fd socket, int timeout_ms) {
  const int64_t deadline = now_ms() + timeout_ms;
  int flags = ::fcntl(socket.get(), F_GETFL);
  ::fcntl(socket.get(), F_SETFL, flags | O_NONBLOCK);
  qmp_client client(std::move(socket));
  auto greeting = client.read_line(deadline);
  if (!greeting)
    return greeting.error();
  auto parsed = nlohmann::json::parse(*greeting, nullptr, false);
  if (parsed.is_discarded() || !parsed.contains("QMP"))
    return make_status(errc::corrupt_record, "qmp: no greeting: " + greeting->substr(0, 200));
  if (auto negotiated =
        client.execute("qmp_capabilities", "", static_cast<int>(deadline - now_ms()));
      !negotiated)
    return negotiated.error();
  return client;
}

result<qmp_client> qmp_client::connect(const std::string& path, int timeout_ms) {
  sockaddr_un address{};
  if (path.size() >= sizeof address.sun_path)
    return make_status(errc::invalid_argument, "qmp: socket path too long: " + path);
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  unique_fd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket
      || ::connect(socket.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    return make_status(errc::unavailable, "qmp: connect " + path + ": " + std::strerror(errno));
  return open(std::move(socket), timeout_ms);
}

result<std::string> qmp_client::read_line(int64_t deadline_ms) {
  for (;;) {
    if (auto end = buffer_.find('\n'); end != std::string::npos) {
      std::string line = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      return line;
    }
    if (buffer_.size() > line_bytes_max)
      return make_status(errc::corrupt_record, "qmp: line too long");
    char chunk[4096];
    ssize_t n = ::read(socket_.get(), chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0)
      return make_status(errc::unavailable, "qmp: QEMU closed the connection");
    if (errno != EAGAIN && errno != EINTR)
      return make_status(errc::unavailable, std::string("qmp: read: ") + std::strerror(errno));
    int64_t left = deadline_ms - now_ms();
    if (left <= 0)
      return make_status(errc::timeout, "qmp: no reply in time");
    pollfd p{socket_.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left));
  }
}

result<std::string> qmp_client::execute(std::string_view command, std::string_view arguments_json,
                                        int timeout_ms) {
  const int64_t deadline = now_ms() + timeout_ms;
  auto line = request_line(command, arguments_json);
  if (!line)
    return line.error();
  if (auto sent = write_all(socket_.get(), *line, deadline); !sent.is_ok())
    return sent;
  return await_reply(command, deadline);
}

result<std::string> qmp_client::execute_with_fd(std::string_view command,
                                                std::string_view arguments_json, int fd,
                                                int timeout_ms) {
  const int64_t deadline = now_ms() + timeout_ms;
  auto line = request_line(command, arguments_json);
  if (!line)
    return line.error();
  // The descriptor rides on the first byte of the command; QEMU attaches it
  // to the monitor when it reads that byte. A short write sends the rest
  // without it.
  std::string& text = *line;
  iovec iov{text.data(), text.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  ssize_t sent = -1;
  for (;;) {
    sent = ::sendmsg(socket_.get(), &message, MSG_NOSIGNAL);
    if (sent >= 0 || (errno != EAGAIN && errno != EINTR))
      break;
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return make_status(errc::timeout, "qmp: write timed out");
    pollfd p{socket_.get(), POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(left));
  }
  if (sent < 0)
    return make_status(errc::unavailable, std::string("qmp: sendmsg: ") + std::strerror(errno));
  if (auto rest = write_all(socket_.get(), std::string_view(text).substr(static_cast<size_t>(sent)),
                            deadline);
      !rest.is_ok())
    return rest;
  return await_reply(command, deadline);
}

result<std::string> qmp_client::await_reply(std::string_view command, int64_t deadline) {
  // One command in flight: the first reply that is not an event is its answer.
  for (;;) {
    auto line = read_line(deadline);
    if (!line)
      return line.error();
    auto reply = nlohmann::json::parse(*line, nullptr, false);
    if (reply.is_discarded() || !reply.is_object())
      return make_status(errc::corrupt_record, "qmp: not JSON: " + line->substr(0, 200));
    if (reply.contains("event"))
      continue;
    if (reply.contains("return"))
      return reply["return"].dump();
    if (reply.contains("error"))
      return make_status(errc::io_error, "qmp: " + std::string(command) + ": "
                                           + reply["error"].value("desc", std::string("error")));
    return make_status(errc::corrupt_record, "qmp: unexpected reply: " + line->substr(0, 200));
  }
}

result<std::string> qmp_client::run_state(int timeout_ms) {
  auto reply = execute("query-status", "", timeout_ms);
  if (!reply)
    return reply.error();
  auto parsed = nlohmann::json::parse(*reply, nullptr, false);
  if (parsed.is_discarded() || !parsed.contains("status"))
    return make_status(errc::corrupt_record, "qmp: query-status: " + *reply);
  return parsed["status"].get<std::string>();
}

} // namespace airlock::worker::microvm
