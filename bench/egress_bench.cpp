// HTTPS through the egress gateway against a direct connection to the same
// upstream, side by side in one run:
//   small        N sequential GET /small (100-byte body) on one keep-alive
//                connection per path, the two paths' requests interleaved so
//                that load from elsewhere on the machine falls on both alike
//   connections  M GET /small per path, each on a fresh TCP + TLS connection
//                (connect, handshake, request, response), interleaved too
//   large        one GET of S MiB per path: MiB/s and the ratio
// The gateway path is worker/egress's egress_gateway as the worker runs it:
// TLS terminated with a leaf minted for bench.test, the Host judged against
// the sandbox's allowlist, an Authorization header injected from a credential
// grant, bench.test resolved by the gateway itself (a static hosts file) and
// the upstream's certificate verified. Everything is in this process over
// loopback; no root needed:
//   - upstream: a blocking OpenSSL HTTPS server on its own threads (one per
//     connection), 127.0.0.1, with a leaf for bench.test from an "upstream"
//     intermediate of the bench's root CA;
//   - gateway: bound to 127.0.0.1, original destination injected (the
//     upstream's port: no nftables redirect here), 127.0.0.0/8 allowed, one
//     sandbox at 127.0.0.1 with profile allowlist ["bench.test"], its CA
//     another intermediate of the same root;
//   - client: blocking OpenSSL trusting only the root, the same code for both
//     paths (SNI and certificate name bench.test).
// After the cases it prints the gateway's stats and checks that every gateway
// request used the credential exactly once and reached the upstream with it,
// and that no direct request carried it.
//
//   egress_bench [--small N] [--connections M] [--large-mb S]
//                [--cases small,connections,large] [--gateway-threads T]
//                [--relay-chunk-kb K]
// T and K set egress_gateway_options::network_threads and
// egress_proxy_options::relay_chunk_bytes (defaults: the gateway's own).
//
// Exit status: 0 measured (targets met or missed: printed), 1 a response was
// wrong (status, length, body) or a check failed, 64 bad options.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crypto/certificates.hpp"
#include "schema/egress.hpp"
#include "schema/errc.hpp"
#include "worker/egress/egress_gateway.hpp"

namespace airlock::bench {
namespace {

using namespace airlock::worker::egress;
using clock_type = std::chrono::steady_clock;

constexpr const char* bench_host = "bench.test";
constexpr const char* bench_secret = "Bearer bench-secret-0123456789abcdef";
constexpr size_t small_body_bytes = 100;
constexpr int warmup_requests = 20;        ///< per path, before the small case's timing
constexpr int socket_timeout_s = 60;       ///< a blocked read or write fails the run
constexpr size_t header_bytes_max = 65536; ///< request and response headers
constexpr size_t io_chunk_bytes = 65536;

struct bench_options {
  int small = 2000;
  int connections = 200;
  uint64_t large_mb = 256;
  std::string cases = "small,connections,large";
  size_t gateway_threads = 1;  ///< egress_gateway_options::network_threads (the worker's default)
  uint32_t relay_chunk_kb = 0; ///< egress_proxy_options::relay_chunk_bytes / 1024; 0: the default
};

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

struct quantiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

quantiles quantiles_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    return v.empty()
             ? 0.0
             : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.5), at(0.9), at(0.99)};
}

std::string format_quantiles(const std::vector<double>& v) {
  auto q = quantiles_of(v);
  char line[128];
  std::snprintf(line, sizeof line, "p50 %8.3f  p90 %8.3f  p99 %8.3f ms  (n=%zu)", q.p50, q.p90,
                q.p99, v.size());
  return line;
}

std::string openssl_error(std::string_view what) {
  std::string text{what};
  if (unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    text += ": ";
    text += buffer;
  }
  ERR_clear_error();
  return text;
}

std::string small_body() {
  std::string body(small_body_bytes, 'x');
  body.back() = '\n';
  return body;
}

void tune_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout{socket_timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

bool write_all(SSL* ssl, const char* data, size_t size) {
  while (size > 0) {
    size_t written = 0;
    if (SSL_write_ex(ssl, data, size, &written) != 1)
      return false;
    data += written;
    size -= written;
  }
  return true;
}

/// Bytes read from a TLS connection, consumed from the front.
struct tls_reader {
  SSL* ssl = nullptr;
  std::string pending;

  /// Appends what one SSL_read returns; false on EOF or error.
  bool fill() {
    char chunk[io_chunk_bytes];
    size_t got = 0;
    if (SSL_read_ex(ssl, chunk, sizeof chunk, &got) != 1)
      return false;
    pending.append(chunk, got);
    return true;
  }

  /// A header block up to and including "\r\n\r\n"; nullopt on EOF or past the limit.
  std::optional<std::string> read_header() {
    for (;;) {
      auto end = pending.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::string header = pending.substr(0, end + 4);
        pending.erase(0, end + 4);
        return header;
      }
      if (pending.size() > header_bytes_max || !fill())
        return std::nullopt;
    }
  }
};

std::string lowercase(std::string text) {
  for (auto& c : text)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

/// Header fields of a header block by lowercase name (the first line skipped).
std::map<std::string, std::string> header_fields(const std::string& header) {
  std::map<std::string, std::string> fields;
  std::istringstream lines{header};
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    fields[lowercase(line.substr(0, colon))] = value;
  }
  return fields;
}

// ---- PKI: one root the client trusts, an intermediate each for the upstream and the gateway

struct bench_pki {
  crypto::key_and_cert root;
  crypto::leaf_minter::leaf upstream_leaf;
  std::string gateway_key_pem;
  std::string gateway_chain_pem; ///< the gateway's intermediate, then the root
};

result<crypto::key_and_cert> make_intermediate(const crypto::key_and_cert& root,
                                               std::string_view name) {
  auto key = crypto::generate_key_pem();
  if (!key)
    return key.error();
  auto public_key = crypto::public_key_pem(*key);
  if (!public_key)
    return public_key.error();
  auto cert = crypto::issue_intermediate(root, *public_key, name, 2);
  if (!cert)
    return cert.error();
  return crypto::key_and_cert{*key, *cert + root.cert_pem};
}

result<bench_pki> make_pki() {
  bench_pki pki;
  auto root = crypto::create_root_ca("airlock egress_bench root", 2);
  if (!root)
    return root.error();
  pki.root = *root;
  auto upstream_ca = make_intermediate(pki.root, "egress_bench upstream CA");
  if (!upstream_ca)
    return upstream_ca.error();
  auto minter = crypto::leaf_minter::create(upstream_ca->key_pem, upstream_ca->cert_pem);
  if (!minter)
    return minter.error();
  auto leaf = (*minter)->for_name(bench_host);
  if (!leaf)
    return leaf.error();
  pki.upstream_leaf = *leaf;
  auto gateway_ca = make_intermediate(pki.root, "egress_bench gateway CA");
  if (!gateway_ca)
    return gateway_ca.error();
  pki.gateway_key_pem = gateway_ca->key_pem;
  pki.gateway_chain_pem = gateway_ca->cert_pem;
  return pki;
}

struct ssl_ctx_deleter {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using ssl_ctx_ptr = std::unique_ptr<SSL_CTX, ssl_ctx_deleter>;

result<ssl_ctx_ptr> server_context(const crypto::leaf_minter::leaf& leaf) {
  ssl_ctx_ptr ctx{SSL_CTX_new(TLS_server_method())};
  if (!ctx)
    return make_status(errc::internal, openssl_error("SSL_CTX_new"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (SSL_CTX_use_certificate(ctx.get(), leaf.cert.get()) != 1
      || SSL_CTX_use_PrivateKey(ctx.get(), leaf.key.get()) != 1)
    return make_status(errc::internal, openssl_error("upstream certificate"));
  for (const auto& cert : leaf.chain)
    SSL_CTX_add1_chain_cert(ctx.get(), cert.get());
  return ctx;
}

/// A client context that trusts only `root_pem` and checks the name bench.test.
result<ssl_ctx_ptr> client_context(const std::string& root_pem) {
  ssl_ctx_ptr ctx{SSL_CTX_new(TLS_client_method())};
  if (!ctx)
    return make_status(errc::internal, openssl_error("SSL_CTX_new"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio{
    BIO_new_mem_buf(root_pem.data(), static_cast<int>(root_pem.size())), &BIO_free};
  std::unique_ptr<X509, decltype(&X509_free)> root{
    PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free};
  if (!root || X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), root.get()) != 1)
    return make_status(errc::internal, openssl_error("client trust store"));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return ctx;
}

// ---- the upstream: "the internet", a blocking HTTPS server, one thread per connection

/// Counts what reached the upstream; the injected header tells the paths apart.
struct upstream_counts {
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> with_credential{0};     ///< Authorization equal to the grant's value
  std::atomic<uint64_t> other_authorization{0}; ///< an Authorization header with another value
  std::atomic<uint64_t> bad_requests{0};        ///< unparseable or unknown path (answered 4xx)
};

/// Serves GET /small (small_body()) and GET /large/<bytes> (that many 'y'
/// bytes) over HTTP/1.1 keep-alive on 127.0.0.1, port 0.
class upstream_server {
public:
  static result<std::unique_ptr<upstream_server>> start(SSL_CTX* ctx) {
    std::unique_ptr<upstream_server> server{new upstream_server(ctx)};
    if (auto listening = server->listen(); !listening)
      return listening;
    server->acceptor_ = std::thread([s = server.get()] { s->accept_loop(); });
    return server;
  }
  ~upstream_server() { stop(); }
  upstream_server(const upstream_server&) = delete;
  upstream_server& operator=(const upstream_server&) = delete;

  uint16_t port() const { return port_; }
  const upstream_counts& counts() const { return counts_; }

  /// Shuts every socket down so that blocked threads return, then joins them.
  void stop() {
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

private:
  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  explicit upstream_server(SSL_CTX* ctx) : ctx_(ctx), large_chunk_(io_chunk_bytes, 'y') {}

  status listen() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0
        || ::listen(listen_fd_, 128) != 0
        || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      return make_status(errc::unavailable,
                         std::string("upstream listen: ") + std::strerror(errno));
    port_ = ntohs(address.sin_port);
    return status::ok();
  }

  void accept_loop() {
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

  /// Joins connection threads that ended. Called with mutex_ held.
  void reap_finished() {
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (*it->done) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void finish(int fd) {
    std::lock_guard lock{mutex_};
    open_fds_.erase(fd);
    ::close(fd);
  }

  void serve(int fd) {
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

  /// Answers one request; false when the connection should close.
  bool answer(SSL* ssl, const std::string& header) {
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

  static bool parse_size(const std::string& text, uint64_t& value) {
    if (text.empty() || text.size() > 15
        || text.find_first_not_of("0123456789") != std::string::npos)
      return false;
    value = std::stoull(text);
    return true;
  }

  static std::string response_header(const char* status_line, uint64_t length, bool keep_alive) {
    return std::string("HTTP/1.1 ") + status_line
           + "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(length)
           + (keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
  }

  static bool respond(SSL* ssl, const char* status_line, const std::string& body, bool keep_alive) {
    // Header and body in one write (one TLS record), as a server would for a small response.
    std::string message = response_header(status_line, body.size(), keep_alive) + body;
    return write_all(ssl, message.data(), message.size()) && keep_alive;
  }

  bool respond_large(SSL* ssl, uint64_t bytes, bool keep_alive) {
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

  SSL_CTX* ctx_;
  const std::string large_chunk_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::mutex mutex_;
  bool stopping_ = false;
  std::set<int> open_fds_;
  std::list<worker> workers_;
  upstream_counts counts_;
};

// ---- the client: blocking OpenSSL, the same code for both paths

/// One TLS connection to 127.0.0.1:port for the name bench.test.
class tls_connection {
public:
  static result<std::unique_ptr<tls_connection>> open(SSL_CTX* ctx, uint16_t port) {
    std::unique_ptr<tls_connection> conn{new tls_connection()};
    conn->fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (conn->fd_ < 0)
      return make_status(errc::unavailable, std::string("socket: ") + std::strerror(errno));
    tune_socket(conn->fd_);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    if (::connect(conn->fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      return make_status(errc::unavailable,
                         "connect to port " + std::to_string(port) + ": " + std::strerror(errno));
    conn->ssl_ = SSL_new(ctx);
    SSL* ssl = conn->ssl_;
    if (!ssl || SSL_set_fd(ssl, conn->fd_) != 1 || SSL_set_tlsext_host_name(ssl, bench_host) != 1
        || SSL_set1_host(ssl, bench_host) != 1)
      return make_status(errc::internal, openssl_error("client SSL setup"));
    if (SSL_connect(ssl) != 1) {
      long verify = SSL_get_verify_result(ssl);
      std::string what = "TLS handshake on port " + std::to_string(port);
      if (verify != X509_V_OK)
        what += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
      return make_status(errc::unavailable, openssl_error(what));
    }
    conn->reader_.ssl = ssl;
    return conn;
  }

  ~tls_connection() {
    if (ssl_) {
      SSL_shutdown(ssl_); // close_notify, so the peer ends the connection cleanly
      SSL_free(ssl_);
    }
    if (fd_ >= 0)
      ::close(fd_);
    ERR_clear_error();
  }
  tls_connection(const tls_connection&) = delete;
  tls_connection& operator=(const tls_connection&) = delete;

  /// GET `path`; checks status 200 and a Content-Length of `expected_bytes`,
  /// reads the body (compared with `expected_body` when given, else counted
  /// and discarded). Returns the body's length.
  result<uint64_t> get(const std::string& path, uint64_t expected_bytes,
                       const std::string* expected_body) {
    std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: " + bench_host + "\r\nUser-Agent: egress_bench\r\n\r\n";
    if (!write_all(ssl_, request.data(), request.size()))
      return make_status(errc::unavailable, openssl_error("sending GET " + path));
    auto header = reader_.read_header();
    if (!header)
      return make_status(errc::unavailable, openssl_error("no response header for GET " + path));
    if (header->rfind("HTTP/1.1 200 ", 0) != 0)
      return make_status(errc::invalid_argument, "GET " + path + " answered "
                                                   + header->substr(0, header->find('\r')) + ": "
                                                   + reader_.pending.substr(0, 200));
    auto fields = header_fields(*header);
    if (fields["content-length"] != std::to_string(expected_bytes))
      return make_status(errc::invalid_argument, "GET " + path + ": Content-Length '"
                                                   + fields["content-length"] + "', expected "
                                                   + std::to_string(expected_bytes));
    return read_body(path, expected_bytes, expected_body);
  }

private:
  tls_connection() = default;

  result<uint64_t> read_body(const std::string& path, uint64_t expected_bytes,
                             const std::string* expected_body) {
    std::string kept;
    uint64_t received = 0;
    auto& pending = reader_.pending;
    for (;;) {
      auto take =
        static_cast<size_t>(std::min<uint64_t>(pending.size(), expected_bytes - received));
      if (expected_body)
        kept.append(pending, 0, take);
      pending.erase(0, take);
      received += take;
      if (received == expected_bytes)
        break;
      if (!reader_.fill())
        return make_status(errc::invalid_argument,
                           openssl_error("GET " + path + ": body ended after "
                                         + std::to_string(received) + " of "
                                         + std::to_string(expected_bytes) + " bytes"));
    }
    if (expected_body && kept != *expected_body)
      return make_status(errc::invalid_argument,
                         "GET " + path + ": body differs from the upstream's");
    return received;
  }

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  tls_reader reader_;
};

// ---- the gateway's doubles: an audit sink that counts, one credential grant

/// Counts records by kind and decision and keeps the first denial's reason.
class counting_audit : public audit_sink {
public:
  void record(schema::audit_record record) override {
    std::lock_guard lock{mutex_};
    ++counts_[record.kind + " " + record.decision];
    if (record.decision == "denied" && first_denial_.empty())
      first_denial_ = record.kind + " " + record.target + ": " + record.reason;
  }
  std::map<std::string, uint64_t> counts() const {
    std::lock_guard lock{mutex_};
    return counts_;
  }
  std::string first_denial() const {
    std::lock_guard lock{mutex_};
    return first_denial_;
  }

private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> counts_;
  std::string first_denial_;
};

/// One grant for bench.test (Authorization, unlimited), answered at once.
class bench_credentials : public credential_source {
public:
  void fetch(const sandbox_view&, std::function<void(result<grants>)> done) override {
    ++fetches;
    schema::credential_grant grant;
    grant.credential_id = "cred_bench";
    grant.name = "bench";
    grant.scope = schema::credential_scope::sandbox;
    grant.hosts = {bench_host};
    grant.header = "Authorization";
    grant.value = bench_secret;
    done(grants{grant}); // allowed on any thread, this one included: the proxy posts it
  }
  std::atomic<uint64_t> fetches{0};
};

/// A scratch directory for the gateway's hosts file and upstream CA file.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "egress-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()))
      path = pattern;
  }
  ~scratch_dir() {
    std::error_code ignored;
    if (!path.empty())
      std::filesystem::remove_all(path, ignored);
  }
  result<std::string> write(const std::string& name, const std::string& text) const {
    if (path.empty())
      return make_status(errc::io_error, "no scratch directory");
    auto file = (path / name).string();
    std::ofstream out{file};
    out << text;
    if (!out.flush())
      return make_status(errc::io_error, "cannot write " + file);
    return file;
  }
};

struct gateway_setup {
  std::shared_ptr<counting_audit> audit = std::make_shared<counting_audit>();
  std::shared_ptr<bench_credentials> credentials = std::make_shared<bench_credentials>();
  std::unique_ptr<egress_gateway> gateway;
};

result<gateway_setup> start_gateway(const bench_options& opt, const bench_pki& pki,
                                    const scratch_dir& dir, uint16_t upstream_port) {
  auto hosts = dir.write("hosts", std::string(bench_host) + " 127.0.0.1\n");
  if (!hosts)
    return hosts.error();
  auto root_file = dir.write("root.pem", pki.root.cert_pem);
  if (!root_file)
    return root_file.error();
  egress_gateway_options options;
  options.bind_address = "127.0.0.1";
  options.network_threads = opt.gateway_threads;
  options.hosts_file = *hosts; // a static_resolver: bench.test -> 127.0.0.1
  options.allowed_private = {"127.0.0.0/8"};
  options.proxy.upstream_ca_file = *root_file;
  if (opt.relay_chunk_kb > 0)
    options.proxy.relay_chunk_bytes = opt.relay_chunk_kb * 1024;
  // No nftables redirect here: every connection "meant" the upstream.
  options.original_destination = [upstream_port](int) -> result<std::pair<uint32_t, uint16_t>> {
    return std::pair<uint32_t, uint16_t>{INADDR_LOOPBACK, upstream_port};
  };
  gateway_setup setup;
  auto gateway = egress_gateway::start(std::move(options), setup.audit, setup.credentials);
  if (!gateway)
    return gateway.error();
  setup.gateway = std::move(gateway.value());
  if (auto installed = setup.gateway->set_authority(pki.gateway_key_pem, pki.gateway_chain_pem);
      !installed)
    return installed;
  sandbox_view sandbox;
  sandbox.sandbox_id = "sb_egress_bench";
  sandbox.tenant_id = "tn_bench";
  sandbox.template_name = "base";
  sandbox.address = "127.0.0.1"; // the client's source address
  sandbox.policy = schema::egress_policy{schema::egress_profile::allowlist, {bench_host}};
  setup.gateway->attach(std::move(sandbox));
  return setup;
}

// ---- the cases

enum path_index { direct_path = 0, gateway_path = 1 };
constexpr const char* path_names[2] = {"direct ", "gateway"};

struct bench_context {
  SSL_CTX* client = nullptr;
  uint16_t ports[2] = {0, 0}; ///< by path_index: the upstream's, the gateway's
  uint64_t requests[2] = {0, 0};
  std::vector<std::string> summary; ///< one line per case, repeated at the end
};

std::string load_average() {
  std::ifstream in{"/proc/loadavg"};
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

const char* verdict(bool met) { return met ? "met" : "MISSED"; }

status path_failed(int path, const status& failure) {
  return make_status(failure.code, std::string(path_names[path]) + " path: " + failure.message);
}

void print_latencies(bench_context& ctx, const char* name, const std::vector<double> (&times)[2],
                     const char* target) {
  for (int p : {direct_path, gateway_path})
    std::cout << "  " << path_names[p] << "  " << format_quantiles(times[p]) << "\n";
  double direct = quantiles_of(times[direct_path]).p50;
  double gateway = quantiles_of(times[gateway_path]).p50;
  char line[256];
  std::snprintf(line, sizeof line, "%s p50: direct %.3f ms, gateway %.3f ms, difference %+.3f ms%s",
                name, direct, gateway, gateway - direct, target);
  std::printf("  p50 difference %+.3f ms%s\n", gateway - direct, target);
  std::fflush(stdout);
  ctx.summary.push_back(line);
}

status bench_small(bench_context& ctx, const bench_options& opt) {
  std::unique_ptr<tls_connection> conns[2];
  for (int p : {direct_path, gateway_path}) {
    auto conn = tls_connection::open(ctx.client, ctx.ports[p]);
    if (!conn)
      return path_failed(p, conn.error());
    conns[p] = std::move(conn.value());
  }
  const std::string body = small_body();
  std::vector<double> times[2];
  for (int i = -warmup_requests; i < opt.small; ++i) {
    for (int p : {direct_path, gateway_path}) {
      auto start = clock_type::now();
      auto got = conns[p]->get("/small", body.size(), &body);
      double elapsed = ms_since(start);
      if (!got)
        return path_failed(p, got.error());
      ++ctx.requests[p];
      if (i >= 0)
        times[p].push_back(elapsed);
    }
  }
  std::cout.flush();
  std::cout << "small: GET /small (" << body.size()
            << " B body), one keep-alive connection per path, " << opt.small
            << " requests each after " << warmup_requests << " unmeasured, interleaved\n";
  bool met = quantiles_of(times[gateway_path]).p50 - quantiles_of(times[direct_path]).p50 <= 1.0;
  print_latencies(ctx, "small", times,
                  met ? "  (target <= +1 ms: met)" : "  (target <= +1 ms: MISSED)");
  return status::ok();
}

status bench_connections(bench_context& ctx, const bench_options& opt) {
  const std::string body = small_body();
  std::vector<double> times[2];
  for (int i = 0; i < opt.connections; ++i) {
    for (int p : {direct_path, gateway_path}) {
      auto start = clock_type::now();
      auto conn = tls_connection::open(ctx.client, ctx.ports[p]);
      if (!conn)
        return path_failed(p, conn.error());
      auto got = (*conn)->get("/small", body.size(), &body);
      double elapsed = ms_since(start);
      if (!got)
        return path_failed(p, got.error());
      ++ctx.requests[p];
      times[p].push_back(elapsed); // the close (close_notify) is not timed
    }
  }
  std::cout << "connections: TCP connect + TLS handshake + GET /small on a fresh connection, "
            << opt.connections
            << " per path, interleaved (gateway: two handshakes, the guest's and the upstream's)\n";
  print_latencies(ctx, "connections", times, "  (no target)");
  return status::ok();
}

status bench_large(bench_context& ctx, const bench_options& opt) {
  const uint64_t bytes = opt.large_mb << 20;
  double mib_per_s[2] = {0, 0};
  std::cout << "large: one GET of " << opt.large_mb
            << " MiB per path, direct first (connection set up untimed)\n";
  for (int p : {direct_path, gateway_path}) {
    auto conn = tls_connection::open(ctx.client, ctx.ports[p]);
    if (!conn)
      return path_failed(p, conn.error());
    auto start = clock_type::now();
    auto got = (*conn)->get("/large/" + std::to_string(bytes), bytes, nullptr);
    double seconds = ms_since(start) / 1000.0;
    if (!got)
      return path_failed(p, got.error());
    ++ctx.requests[p];
    mib_per_s[p] = static_cast<double>(bytes) / (1 << 20) / seconds;
    std::printf("  %s  %9.1f MiB/s  (%llu bytes in %.3f s)\n", path_names[p], mib_per_s[p],
                static_cast<unsigned long long>(bytes), seconds);
  }
  double ratio = 100.0 * mib_per_s[gateway_path] / mib_per_s[direct_path];
  std::printf("  gateway/direct %.1f %%  (target >= 50 %%: %s)\n", ratio, verdict(ratio >= 50.0));
  char line[256];
  std::snprintf(line, sizeof line,
                "large %llu MiB: direct %.1f MiB/s, gateway %.1f MiB/s, ratio %.1f %%",
                static_cast<unsigned long long>(opt.large_mb), mib_per_s[direct_path],
                mib_per_s[gateway_path], ratio);
  ctx.summary.push_back(line);
  std::cout.flush();
  return status::ok();
}

// ---- stats and checks

void print_stats(const egress_gateway& gateway, const counting_audit& audit,
                 const bench_credentials& credentials, const upstream_counts& upstream) {
  auto s = gateway.stats();
  std::printf(
    "gateway stats: connections %llu, tls_terminated %llu, allowed_requests %llu, credential_uses "
    "%llu, "
    "denied %llu, rate_limited %llu, upstream_failures %llu, unknown_peers %llu, active %llu, "
    "passthrough %llu, upgrades %llu\n",
    static_cast<unsigned long long>(s.connections),
    static_cast<unsigned long long>(s.tls_terminated),
    static_cast<unsigned long long>(s.allowed_requests),
    static_cast<unsigned long long>(s.credential_uses), static_cast<unsigned long long>(s.denied),
    static_cast<unsigned long long>(s.rate_limited),
    static_cast<unsigned long long>(s.upstream_failures),
    static_cast<unsigned long long>(s.unknown_peers),
    static_cast<unsigned long long>(s.active_connections),
    static_cast<unsigned long long>(s.passthrough), static_cast<unsigned long long>(s.upgrades));
  std::cout << "audit records:";
  for (const auto& [what, count] : audit.counts())
    std::cout << " " << what << " " << count << ";";
  std::cout << " credential fetches " << credentials.fetches << "\n";
  std::cout << "upstream: connections " << upstream.connections << ", requests "
            << upstream.requests << ", with the injected Authorization " << upstream.with_credential
            << ", other Authorization " << upstream.other_authorization << ", bad requests "
            << upstream.bad_requests << "\n";
}

/// Every gateway request used the credential once and reached the upstream
/// with it; no direct request carried it; nothing was denied or failed.
std::vector<std::string> check_counts(const bench_context& ctx, const egress_gateway& gateway,
                                      const counting_audit& audit,
                                      const upstream_counts& upstream) {
  auto s = gateway.stats();
  auto audits = audit.counts();
  const uint64_t via_gateway = ctx.requests[gateway_path];
  const uint64_t direct = ctx.requests[direct_path];
  std::vector<std::string> failures;
  auto expect = [&failures](const std::string& what, uint64_t got, uint64_t want) {
    if (got != want)
      failures.push_back(what + " is " + std::to_string(got) + ", expected "
                         + std::to_string(want));
  };
  expect("gateway credential_uses", s.credential_uses, via_gateway);
  expect("gateway allowed_requests", s.allowed_requests, via_gateway);
  expect("audit 'credential allowed' records", audits["credential allowed"], via_gateway);
  expect("upstream requests with the injected Authorization", upstream.with_credential,
         via_gateway);
  expect("upstream requests", upstream.requests, via_gateway + direct);
  expect("upstream requests with another Authorization", upstream.other_authorization, 0);
  expect("upstream bad requests", upstream.bad_requests, 0);
  expect("gateway denied", s.denied, 0);
  expect("gateway upstream_failures", s.upstream_failures, 0);
  if (!audit.first_denial().empty())
    failures.push_back("first denial in the audit: " + audit.first_denial());
  return failures;
}

int run(const bench_options& opt) {
  std::signal(SIGPIPE, SIG_IGN); // raw sockets below; a peer that closed is an error, not a signal
  auto pki = make_pki();
  if (!pki)
    return std::cerr << "egress_bench: certificates: " << pki.error().message << "\n", 1;
  auto upstream_tls = server_context(pki->upstream_leaf);
  auto client_tls = client_context(pki->root.cert_pem);
  if (!upstream_tls || !client_tls)
    return std::cerr << "egress_bench: TLS contexts: "
                     << (upstream_tls ? client_tls.error() : upstream_tls.error()).message << "\n",
           1;
  auto upstream = upstream_server::start(upstream_tls->get());
  if (!upstream)
    return std::cerr << "egress_bench: upstream: " << upstream.error().message << "\n", 1;
  scratch_dir dir;
  auto setup = start_gateway(opt, *pki, dir, (*upstream)->port());
  if (!setup)
    return std::cerr << "egress_bench: gateway: " << setup.error().message << "\n", 1;
  bench_context ctx;
  ctx.client = client_tls->get();
  ctx.ports[direct_path] = (*upstream)->port();
  ctx.ports[gateway_path] = setup->gateway->proxy_port();
  std::cout << "egress_bench: " << std::thread::hardware_concurrency() << " cores, load average "
            << load_average() << "; upstream 127.0.0.1:" << ctx.ports[direct_path]
            << " (thread per connection), "
            << "gateway 127.0.0.1:" << ctx.ports[gateway_path] << " (" << opt.gateway_threads
            << " network thread(s), relay chunk "
            << (opt.relay_chunk_kb > 0 ? std::to_string(opt.relay_chunk_kb) + " KiB"
                                       : std::string("default"))
            << "), TLS via " << OpenSSL_version(OPENSSL_VERSION) << "\n";
  auto wanted = [&opt](std::string_view name) { return opt.cases.find(name) != std::string::npos; };
  status outcome = status::ok();
  if (outcome && wanted("small"))
    outcome = bench_small(ctx, opt);
  if (outcome && wanted("connections"))
    outcome = bench_connections(ctx, opt);
  if (outcome && wanted("large"))
    outcome = bench_large(ctx, opt);
  print_stats(*setup->gateway, *setup->audit, *setup->credentials, (*upstream)->counts());
  auto failures = check_counts(ctx, *setup->gateway, *setup->audit, (*upstream)->counts());
  setup->gateway->stop();
  (*upstream)->stop();
  if (!outcome) {
    std::cerr << "egress_bench: WRONG RESPONSE: " << outcome.message << "\n";
    return 1;
  }
  for (const auto& failure : failures)
    std::cerr << "egress_bench: CHECK FAILED: " << failure << "\n";
  if (!failures.empty())
    return 1;
  std::cout << "check: credential uses = gateway requests = upstream requests with the header = "
            << ctx.requests[gateway_path]
            << "; direct requests without it = " << ctx.requests[direct_path] << ": ok\n";
  std::cout << "summary (load average now " << load_average() << "):\n";
  for (const auto& line : ctx.summary)
    std::cout << "  " << line << "\n";
  return 0;
}

} // namespace
} // namespace airlock::bench

int main(int argc, char** argv) try {
  airlock::bench::bench_options opt;
  for (int i = 1; i < argc; i += 2) {
    std::string key = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "option " << key << " needs a value\n";
      return 64;
    }
    std::string value = argv[i + 1];
    if (key == "--small")
      opt.small = std::stoi(value);
    else if (key == "--connections")
      opt.connections = std::stoi(value);
    else if (key == "--large-mb")
      opt.large_mb = std::stoull(value);
    else if (key == "--cases")
      opt.cases = value;
    else if (key == "--gateway-threads")
      opt.gateway_threads = std::stoul(value);
    else if (key == "--relay-chunk-kb")
      opt.relay_chunk_kb = static_cast<uint32_t>(std::stoul(value));
    else {
      std::cerr << "unknown option " << key
                << " (--small N --connections M --large-mb S --cases small,connections,large "
                   "--gateway-threads T --relay-chunk-kb K)\n";
      return 64;
    }
  }
  if (opt.small < 1 || opt.connections < 1 || opt.large_mb < 1 || opt.gateway_threads < 1) {
    std::cerr << "egress_bench: counts must be at least 1\n";
    return 64;
  }
  return airlock::bench::run(opt);
} catch (const std::exception& e) {
  std::cerr << "egress_bench: " << e.what() << " (options take numbers where shown)\n";
  return 64;
}
