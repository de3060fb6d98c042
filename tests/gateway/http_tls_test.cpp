// The HTTP server over TLS: a client that trusts the CA and finds the
// listener's address in the certificate is served (JSON answers and event
// streams that end cleanly); an untrusted CA, a wrong address or a plain
// client get nothing; replaced files are served from the next connection,
// broken ones are not.

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>

#include "actors/log.hpp"
#include "cli/http.hpp"
#include "crypto/certificates.hpp"
#include "crypto/cluster_certificates.hpp"
#include "gateway/http_server.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/wait.hpp"

namespace airlock::gateway {
namespace {

struct issued {
  crypto::key_and_cert ca;
  std::string key_pem;
  std::string cert_pem;
};

/// A CA and a server certificate from it naming `address`.
issued issue_for(const std::string& address, const std::string& ca_name = "test-ca") {
  issued out;
  out.ca = *crypto::create_root_ca(ca_name, 2);
  out.key_pem = *crypto::generate_key_pem();
  auto csr = crypto::create_csr(out.key_pem, "server");
  out.cert_pem = *crypto::issue_member_certificate(out.ca, *csr, "server", 1, {address});
  return out;
}

/// A log's text that the test may read while the server's threads write it.
class shared_text : public std::streambuf {
public:
  std::string text() {
    std::lock_guard<std::mutex> guard(mutex_);
    return text_;
  }

protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) {
      std::lock_guard<std::mutex> guard(mutex_);
      text_ += static_cast<char>(c);
    }
    return c;
  }
  std::streamsize xsputn(const char* bytes, std::streamsize n) override {
    std::lock_guard<std::mutex> guard(mutex_);
    text_.append(bytes, static_cast<size_t>(n));
    return n;
  }

private:
  std::mutex mutex_;
  std::string text_;
};

class http_tls : public ::testing::Test {
protected:
  void install(const issued& files) {
    // Replaced by rename, as the worker's certificate renewal does.
    test::write_file(cert_ + ".new", files.cert_pem);
    test::write_file(key_ + ".new", files.key_pem);
    ASSERT_EQ(std::rename((key_ + ".new").c_str(), key_.c_str()), 0);
    ASSERT_EQ(std::rename((cert_ + ".new").c_str(), cert_.c_str()), 0);
  }

  std::unique_ptr<http_server> start(route_table routes = {}) {
    http_server_options options;
    options.tls = http_tls_files{cert_, key_};
    add_operator_routes(routes, {});
    auto server = http_server::start(options, {"127.0.0.1", 0}, std::move(routes), log_);
    EXPECT_TRUE(server.has_value()) << (server ? "" : server.error().message);
    return server ? std::move(*server) : nullptr;
  }

  result<cli::http_response> get(const http_server& server, const std::string& path,
                                 const std::string& ca_pem, const std::string& host = "127.0.0.1") {
    cli::http_client_options options;
    options.ca_pem = ca_pem;
    options.connect_timeout_ms = 5'000;
    options.io_timeout_ms = 10'000;
    cli::http_request request;
    request.url = "https://" + host + ":" + std::to_string(server.local_endpoint().port) + path;
    return cli::http_send(request, options);
  }

  test::temp_dir dir_{"airlock-tls"};
  std::string cert_ = dir_.path() + "/server.crt";
  std::string key_ = dir_.path() + "/server.key";
  shared_text log_text_;
  std::ostream log_stream_{&log_text_};
  actors::log_sink sink_{log_stream_};
  actors::logger log_{"test", actors::log_level::info, sink_};
};

TEST_F(http_tls, a_client_that_trusts_the_ca_is_served) {
  auto files = issue_for("127.0.0.1");
  install(files);
  auto server = start();
  ASSERT_TRUE(server);
  auto reply = get(*server, "/healthz", files.ca.cert_pem);
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_NE(reply->body.find("\"ok\""), std::string::npos);
  EXPECT_EQ(server->stats().tls_handshakes_failed, 0u);
}

TEST_F(http_tls, an_untrusted_ca_a_wrong_address_and_a_plain_client_get_nothing) {
  // The certificate names 127.0.0.2; the listener is at 127.0.0.1.
  auto files = issue_for("127.0.0.2");
  install(files);
  auto server = start();
  ASSERT_TRUE(server);
  auto misnamed = get(*server, "/healthz", files.ca.cert_pem);
  ASSERT_FALSE(misnamed);
  EXPECT_NE(misnamed.error().message.find("not trusted"), std::string::npos)
    << misnamed.error().message;

  auto other_ca = issue_for("127.0.0.1", "other-ca");
  auto untrusted = get(*server, "/healthz", other_ca.ca.cert_pem);
  ASSERT_FALSE(untrusted);
  EXPECT_EQ(untrusted.code(), errc::unavailable);
  EXPECT_NE(untrusted.error().message.find("not trusted"), std::string::npos)
    << untrusted.error().message;
  EXPECT_NE(untrusted.error().message.find("--ca-file"), std::string::npos);

  // Plain HTTP to a TLS listener: no HTTP answer at all.
  auto plain = test::http_get("127.0.0.1", server->local_endpoint().port, "/healthz");
  EXPECT_FALSE(plain);
  EXPECT_TRUE(test::wait_for([&] { return server->stats().tls_handshakes_failed >= 3; }));
  EXPECT_EQ(server->stats().requests, 0u);
}

TEST_F(http_tls, an_event_stream_ends_with_close_notify_not_a_truncation) {
  auto files = issue_for("127.0.0.1");
  install(files);
  route_table routes;
  routes.add_async(http::verb::get, "/events", [](std::shared_ptr<exchange> ex) {
    auto stream = ex->open_sse();
    for (int i = 0; i < 3; ++i)
      stream->send("line", "event " + std::to_string(i), std::to_string(i));
    stream->close();
  });
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  cli::http_client_options options;
  options.ca_pem = files.ca.cert_pem;
  cli::http_request request;
  request.url = "https://127.0.0.1:" + std::to_string(server->local_endpoint().port) + "/events";
  std::string body;
  // A TLS stream closed without close_notify reads as "stream truncated": an
  // error here, after the bytes that came.
  auto reply = cli::http_stream(request, options, [&body](std::string_view bytes) {
    body += bytes;
    return true;
  });
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_NE(body.find("data: event 2"), std::string::npos) << body;
}

TEST_F(http_tls, replaced_files_are_served_from_the_next_connection_broken_ones_are_not) {
  auto first = issue_for("127.0.0.1", "first-ca");
  install(first);
  auto server = start();
  ASSERT_TRUE(server);
  ASSERT_TRUE(get(*server, "/healthz", first.ca.cert_pem));

  // A certificate that does not parse: the one in use stays.
  test::write_file(cert_ + ".new", "not a certificate");
  ASSERT_EQ(std::rename((cert_ + ".new").c_str(), cert_.c_str()), 0);
  EXPECT_TRUE(test::wait_for(
    [&] {
      // Each connection may look at the files; the log says when one did.
      bool served = get(*server, "/healthz", first.ca.cert_pem).has_value();
      return served && log_text_.text().find("cannot be used") != std::string::npos;
    },
    test::wait_max, std::chrono::milliseconds(200)))
    << log_text_.text();
  EXPECT_EQ(server->stats().tls_reloads, 0u);

  // A renewed certificate from another CA: new connections get it.
  auto second = issue_for("127.0.0.1", "second-ca");
  install(second);
  EXPECT_TRUE(
    test::wait_for([&] { return get(*server, "/healthz", second.ca.cert_pem).has_value(); },
                   test::wait_max, std::chrono::milliseconds(200)));
  EXPECT_FALSE(get(*server, "/healthz", first.ca.cert_pem));
  EXPECT_GE(server->stats().tls_reloads, 1u);
}

TEST_F(http_tls, a_listener_whose_files_cannot_be_used_does_not_start) {
  auto files = issue_for("127.0.0.1");
  test::write_file(cert_, files.cert_pem);
  test::write_file(key_, issue_for("127.0.0.1").key_pem); // another key
  http_server_options options;
  options.tls = http_tls_files{cert_, key_};
  auto mismatched = http_server::start(options, {"127.0.0.1", 0}, {}, log_);
  ASSERT_FALSE(mismatched);
  EXPECT_EQ(mismatched.code(), errc::invalid_argument);
  EXPECT_NE(mismatched.error().message.find("key file " + key_), std::string::npos)
    << mismatched.error().message;
  options.tls = http_tls_files{dir_.path() + "/absent.crt", key_};
  auto missing = http_server::start(options, {"127.0.0.1", 0}, {}, log_);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("absent.crt"), std::string::npos);
}

} // namespace
} // namespace airlock::gateway
