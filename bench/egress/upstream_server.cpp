#include "bench/egress/upstream_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bench/egress/tls_io.hpp"

namespace airlock::egress_bench {

result<std::unique_ptr<upstream_server>> upstream_server::start(SSL_CTX* ctx) {
  std::unique_ptr<upstream_server> server{new upstream_server(ctx)};
  if (auto listening = server->listen(); !listening)
    return listening;
  server->acceptor_ = std::thread([s = server.get()] { s->accept_loop(); });
  return server;
}

upstream_server::~upstream_server() { stop(); }

void upstream_server::stop() {
  if (listen_fd_ < 0)
    return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable())
    acceptor_.join();
  {
    std::lock_guard lock{mutex_};
    stopping_ = true;
    for (int fd : open_fds_)
      ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& worker : workers_)
    worker.thread.join();
  workers_.clear();
  ::close(listen_fd_);
  listen_fd_ = -1;
}

upstream_server::upstream_server(SSL_CTX* ctx) : ctx_(ctx), large_chunk_(io_chunk_bytes, 'y') {}

status upstream_server::listen() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0
      || ::listen(listen_fd_, 128) != 0
      || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return make_status(errc::unavailable, std::string("upstream listen: ") + std::strerror(errno));
  port_ = ntohs(address.sin_port);
  return status::ok();
}

void upstream_server::accept_loop() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return; // shut down by stop()
    }
    tune_socket(fd);
    ++counts_.connections;
    std::lock_guard lock{mutex_};
    reap_finished();
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_fds_.insert(fd);
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(worker{std::thread([this, fd, done] {
                                serve(fd);
                                finish(fd);
                                *done = true;
                              }),
                              done});
  }
}

void upstream_server::reap_finished() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (*it->done) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void upstream_server::finish(int fd) {
  std::lock_guard lock{mutex_};
  open_fds_.erase(fd);
  ::close(fd);
}

void upstream_server::serve(int fd) {
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl{SSL_new(ctx_), &SSL_free};
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1 || SSL_accept(ssl.get()) != 1) {
    ERR_clear_error();
    return;
  }
  tls_reader reader{ssl.get(), {}};
  while (auto header = reader.read_header()) {
    if (!answer(ssl.get(), *header))
      break;
  }
  SSL_shutdown(ssl.get());
  ERR_clear_error();
}

bool upstream_server::answer(SSL* ssl, const std::string& header) {
  ++counts_.requests;
  auto fields = header_fields(header);
  if (auto auth = fields.find("authorization"); auth != fields.end()) {
    if (auth->second == bench_secret)
      ++counts_.with_credential;
    else
      ++counts_.other_authorization;
  }
  bool keep_alive = lowercase(fields["connection"]) != "close";
  std::string path;
  if (header.rfind("GET ", 0) == 0)
    path = header.substr(4, header.find(' ', 4) - 4);
  uint64_t large_bytes = 0;
  if (path == "/small")
    return respond(ssl, "200 OK", small_body(), keep_alive);
  if (path.rfind("/large/", 0) == 0 && parse_size(path.substr(7), large_bytes))
    return respond_large(ssl, large_bytes, keep_alive);
  ++counts_.bad_requests;
  return respond(ssl, "404 Not Found", "no such path\n", false);
}

bool upstream_server::parse_size(const std::string& text, uint64_t& value) {
  if (text.empty() || text.size() > 15 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  value = std::stoull(text);
  return true;
}

std::string upstream_server::response_header(const char* status_line, uint64_t length,
                                             bool keep_alive) {
  return std::string("HTTP/1.1 ") + status_line + "\r\nContent-Type: text/plain\r\nContent-Length: "
         + std::to_string(length) + (keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
}

bool upstream_server::respond(SSL* ssl, const char* status_line, const std::string& body,
                              bool keep_alive) {
  // Header and body in one write (one TLS record), as a server would for a small response.
  std::string message = response_header(status_line, body.size(), keep_alive) + body;
  return write_all(ssl, message.data(), message.size()) && keep_alive;
}

bool upstream_server::respond_large(SSL* ssl, uint64_t bytes, bool keep_alive) {
  std::string header = response_header("200 OK", bytes, keep_alive);
  if (!write_all(ssl, header.data(), header.size()))
    return false;
  while (bytes > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, large_chunk_.size()));
    if (!write_all(ssl, large_chunk_.data(), n))
      return false;
    bytes -= n;
  }
  return keep_alive;
}

} // namespace airlock::egress_bench
