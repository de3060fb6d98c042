#include "tests/egress_e2e/upstream_world.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "crypto/certificates.hpp"

namespace airlock::test {

namespace {

bool run_quiet(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv)
    line += "'" + arg + "' ";
  return std::system((line + ">/dev/null 2>&1").c_str()) == 0;
}

std::string sha256_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  std::string out;
  char hex[3];
  for (unsigned i = 0; i < size; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
  }
  return out;
}

/// A byte stream: a plain socket or TLS over it.
struct stream {
  int fd = -1;
  SSL* ssl = nullptr;
  ~stream() {
    if (ssl != nullptr) {
      SSL_shutdown(ssl);
      SSL_free(ssl);
    }
    if (fd >= 0)
      ::close(fd);
  }
  long read(char* buffer, size_t size) {
    if (ssl != nullptr)
      return SSL_read(ssl, buffer, static_cast<int>(size));
    return ::read(fd, buffer, size);
  }
  bool write(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      long n = ssl != nullptr
                 ? SSL_write(ssl, text.data() + done, static_cast<int>(text.size() - done))
                 : ::write(fd, text.data() + done, text.size() - done);
      if (n <= 0)
        return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
};

struct request {
  std::string method, path;
  std::map<std::string, std::string> headers; ///< lower-case names
};

/// Reads one request head (bodies are not used by these servers; a
/// Content-Length body is read and dropped).
bool read_request(stream& s, std::string& buffer, request& out) {
  size_t end;
  while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > 65536)
      return false;
    char chunk[4096];
    long n = s.read(chunk, sizeof chunk);
    if (n <= 0)
      return false;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  std::string head = buffer.substr(0, end);
  buffer.erase(0, end + 4);
  auto line_end = head.find("\r\n");
  std::string first = head.substr(0, line_end);
  auto sp1 = first.find(' ');
  auto sp2 = first.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos)
    return false;
  out.method = first.substr(0, sp1);
  out.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t at = line_end == std::string::npos ? head.size() : line_end + 2;
  while (at < head.size()) {
    auto next = head.find("\r\n", at);
    std::string line = head.substr(at, next == std::string::npos ? std::string::npos : next - at);
    at = next == std::string::npos ? head.size() : next + 2;
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string name = line.substr(0, colon);
    for (char& c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    out.headers[name] = value;
  }
  if (auto length = out.headers.find("content-length"); length != out.headers.end()) {
    size_t want = std::stoul(length->second);
    while (buffer.size() < want) {
      char chunk[4096];
      long n = s.read(chunk, sizeof chunk);
      if (n <= 0)
        return false;
      buffer.append(chunk, static_cast<size_t>(n));
    }
    buffer.erase(0, want);
  }
  return true;
}

std::string response(int status, const std::string& reason, const std::string& type,
                     const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " + type
         + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string websocket_accept(const std::string& key) {
  std::string text = key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  unsigned char digest[20];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr);
  unsigned char encoded[64];
  int n = EVP_EncodeBlock(encoded, digest, static_cast<int>(size));
  return std::string(reinterpret_cast<char*>(encoded), static_cast<size_t>(n));
}

/// Serves requests on one connection until it closes.
void serve_connection(stream& s, const std::string& who) {
  std::string buffer;
  request req;
  while (read_request(s, buffer, req)) {
    if (who == "attacker") {
      if (!s.write(response(200, "OK", "text/plain", "attacker")))
        return;
      continue;
    }
    if (req.path == "/ws" && req.headers.count("upgrade") != 0) {
      std::string reply = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Accept: "
                          + websocket_accept(req.headers["sec-websocket-key"]) + "\r\n\r\n";
      if (!s.write(reply) || (!buffer.empty() && !s.write(buffer)))
        return;
      char chunk[4096];
      long n;
      while ((n = s.read(chunk, sizeof chunk)) > 0)
        if (!s.write(std::string(chunk, static_cast<size_t>(n))))
          return;
      return;
    }
    if (req.path.rfind("/bytes/", 0) == 0) {
      size_t count = std::stoul(req.path.substr(7));
      std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         "Content-Length: "
                         + std::to_string(count) + "\r\n\r\n";
      if (!s.write(head))
        return;
      std::string block(65536, 'x');
      while (count > 0) {
        size_t now = std::min(count, block.size());
        if (!s.write(block.substr(0, now)))
          return;
        count -= now;
      }
      continue;
    }
    nlohmann::json body{{"server", "real"},
                        {"method", req.method},
                        {"path", req.path},
                        {"host", req.headers["host"]},
                        {"auth_sha256", req.headers.count("authorization") != 0
                                          ? sha256_hex(req.headers["authorization"])
                                          : ""}};
    nlohmann::json names = nlohmann::json::array();
    for (const auto& [name, value] : req.headers)
      names.push_back(name);
    body["header_names"] = names;
    if (!s.write(response(200, "OK", "application/json", body.dump())))
      return;
  }
}

int listen_on(const char* address, uint16_t port, int type) {
  int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, address, &addr.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
      || (type == SOCK_STREAM && ::listen(fd, 64) != 0)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

} // namespace

std::unique_ptr<upstream_world> upstream_world::start(std::string& error) {
  std::unique_ptr<upstream_world> world(new upstream_world());
  if (!world->make_certificates(error) || !world->make_network(error))
    return nullptr;
  world->start_servers();
  if (!world->start_shared_host(error))
    return nullptr;
  write_file(world->hosts_file(), "# the egress e2e tests' world\n"
                                  "api.test 198.51.100.10\n"
                                  "other.test 198.51.100.10\n"
                                  "www.api.test 198.51.100.10\n"
                                  "evil.test 198.51.100.11\n"
                                  "cdn.wild.test 198.51.100.12\n"
                                  "allowed.test 198.51.100.12\n"
                                  "meta.test 169.254.169.254\n"
                                  "private.test 10.0.0.5\n"
                                  "loop.test 127.0.0.1\n");
  return world;
}

bool upstream_world::make_certificates(std::string& error) {
  auto root = crypto::create_root_ca("airlock egress e2e upstream CA", 2);
  auto key = crypto::generate_key_pem();
  if (!root || !key) {
    error = "cannot make the upstream CA";
    return false;
  }
  auto public_key = crypto::public_key_pem(*key);
  auto intermediate =
    crypto::issue_intermediate(*root, public_key ? *public_key : "", "upstream issuer", 2);
  if (!intermediate) {
    error = "cannot issue the upstream intermediate";
    return false;
  }
  write_file(ca_file(), root->cert_pem);
  key_pem_ = *key;
  cert_pem_ = *intermediate + root->cert_pem;
  return true;
}

bool upstream_world::make_network(std::string& error) {
  netns_ = "airlock-egr-inet-" + std::to_string(::getpid());
  veth_ = "eginet" + std::to_string(::getpid() % 100000);
  std::string peer = veth_ + "p";
  // Leftovers of a crashed earlier run (any pid: the suite's host lock is
  // held) would hold the addresses.
  run_quiet(
    {"/bin/sh", "-c",
     "for l in $(ip -o link show | grep -o \"eginet[0-9]*@\" | tr -d @); do ip link del $l; done;"
     " for n in $(ip netns list | grep -o \"airlock-egr-inet-[0-9]*\"); do ip netns del $n; done;"
     " pkill -KILL -f egress_e2e/shared_host.py"});
  bool ok =
    run_quiet({"/sbin/ip", "netns", "add", netns_})
    && run_quiet(
      {"/sbin/ip", "link", "add", veth_, "type", "veth", "peer", "name", peer, "netns", netns_})
    && run_quiet({"/sbin/ip", "addr", "add", "198.51.100.1/24", "dev", veth_})
    && run_quiet({"/sbin/ip", "link", "set", veth_, "up"})
    && run_quiet({"/sbin/ip", "-n", netns_, "addr", "add", "198.51.100.10/24", "dev", peer})
    && run_quiet({"/sbin/ip", "-n", netns_, "addr", "add", "198.51.100.11/24", "dev", peer})
    && run_quiet({"/sbin/ip", "-n", netns_, "addr", "add", "198.51.100.12/24", "dev", peer})
    && run_quiet({"/sbin/ip", "-n", netns_, "link", "set", peer, "up"})
    && run_quiet({"/sbin/ip", "-n", netns_, "link", "set", "lo", "up"})
    && run_quiet({"/sbin/ip", "-n", netns_, "route", "add", "default", "via", "198.51.100.1"});
  if (!ok)
    error =
      "cannot create the upstream network namespace " + netns_ + " (is 198.51.100.0/24 in use?)";
  return ok;
}

void upstream_world::start_servers() {
  // Sockets are made on a thread inside the namespace; they stay in it.
  std::mutex ready_mutex;
  std::string ns_path = "/run/netns/" + netns_;
  std::thread maker([this, ns_path] {
    int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0)
      return;
    ::close(ns);
    sockets_.push_back(listen_on(upstream_address, 80, SOCK_STREAM));
    sockets_.push_back(listen_on(upstream_address, 8080, SOCK_STREAM));
    sockets_.push_back(listen_on(upstream_address, 443, SOCK_STREAM));
    sockets_.push_back(listen_on(attacker_address, 80, SOCK_STREAM));
    sockets_.push_back(listen_on(attacker_address, 53, SOCK_DGRAM));
    sockets_.push_back(listen_on(attacker_address, 443, SOCK_DGRAM));
  });
  maker.join();
  auto* ctx = SSL_CTX_new(TLS_server_method());
  auto minter = crypto::leaf_minter::create(key_pem_, cert_pem_);
  std::shared_ptr<crypto::leaf_minter> shared_minter(minter ? std::move(*minter) : nullptr);
  auto accept_loop = [this, ctx, shared_minter](int listener, bool tls, std::string who) {
    while (!stopping_) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0)
        return;
      std::thread([fd, tls, ctx, shared_minter, who, this] {
        stream s;
        s.fd = fd;
        if (who == "attacker")
          ++attacker_count_;
        if (tls) {
          s.ssl = SSL_new(ctx);
          SSL_set_fd(s.ssl, fd);
          // The certificate for whatever name the client asked for.
          SSL_set_cert_cb(
            s.ssl,
            [](SSL* ssl, void* arg) -> int {
              auto* issuer = static_cast<crypto::leaf_minter*>(arg);
              const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
              auto leaf = issuer->for_name(name != nullptr ? name : "api.test");
              if (!leaf)
                return 0;
              SSL_use_certificate(ssl, leaf->cert.get());
              SSL_use_PrivateKey(ssl, leaf->key.get());
              for (const auto& link : leaf->chain)
                SSL_add1_chain_cert(ssl, link.get());
              return 1;
            },
            shared_minter.get());
          if (SSL_accept(s.ssl) != 1)
            return;
        }
        serve_connection(s, who);
      }).detach();
    }
  };
  auto udp_loop = [this](int fd) {
    char buffer[2048];
    while (!stopping_) {
      if (::recv(fd, buffer, sizeof buffer, 0) < 0)
        return;
      ++udp_count_;
    }
  };
  threads_.emplace_back(accept_loop, sockets_[0], false, "real");
  threads_.emplace_back(accept_loop, sockets_[1], false, "real");
  threads_.emplace_back(accept_loop, sockets_[2], true, "real");
  threads_.emplace_back(accept_loop, sockets_[3], false, "attacker");
  threads_.emplace_back(udp_loop, sockets_[4]);
  threads_.emplace_back(udp_loop, sockets_[5]);
  (void)ready_mutex;
}

bool upstream_world::start_shared_host(std::string& error) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    error = "pipe for the shared host failed";
    return false;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(ready[1], STDOUT_FILENO);
    ::execl("/sbin/ip", "ip", "netns", "exec", netns_.c_str(), "/usr/bin/python3",
            AIRLOCK_SHARED_HOST_PY, shared_host_address, "80", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(ready[1]);
  shared_host_pid_ = pid;
  // The server prints "ready" once it listens; end of file means it died
  // (python3-h2 missing: scripts/bootstrap installs it for the tests).
  std::string said;
  char chunk[64];
  long n;
  while (said.find('\n') == std::string::npos && (n = ::read(ready[0], chunk, sizeof chunk)) > 0)
    said.append(chunk, static_cast<size_t>(n));
  ::close(ready[0]);
  if (said.rfind("ready", 0) != 0) {
    error =
      "the shared host (tests/egress_e2e/shared_host.py) did not start: is Debian's python3-h2 "
      "installed? (scripts/bootstrap test installs it)";
    return false;
  }
  return true;
}

upstream_world::~upstream_world() {
  if (shared_host_pid_ > 0) {
    ::kill(shared_host_pid_, SIGKILL);
    ::waitpid(shared_host_pid_, nullptr, 0);
  }
  stopping_ = true;
  for (int fd : sockets_)
    if (fd >= 0)
      ::shutdown(fd, SHUT_RDWR);
  for (auto& thread : threads_)
    if (thread.joinable())
      thread.join();
  for (int fd : sockets_)
    if (fd >= 0)
      ::close(fd);
  run_quiet({"/sbin/ip", "link", "del", veth_});
  run_quiet({"/sbin/ip", "netns", "del", netns_});
}

} // namespace airlock::test
