#include "worker/egress/client_hello.hpp"

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace airlock::worker::egress {
namespace {

/// The ClientHello an OpenSSL client sends, captured from a memory BIO.
std::string openssl_client_hello(const char* server_name) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context{SSL_CTX_new(TLS_client_method()),
                                                            SSL_CTX_free};
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl{SSL_new(context.get()), SSL_free};
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), in, out); // the SSL owns both now
  if (server_name)
    SSL_set_tlsext_host_name(ssl.get(), server_name);
  EXPECT_EQ(SSL_connect(ssl.get()), -1); // waits for the server's answer
  char* data = nullptr;
  long size = BIO_get_mem_data(out, &data);
  return std::string(data, static_cast<std::size_t>(size));
}

/// Re-frames one record's handshake bytes into two records.
std::string split_into_two_records(const std::string& hello) {
  std::string payload = hello.substr(5);
  std::size_t half = payload.size() / 2;
  auto record = [&](std::string_view part) {
    std::string r{"\x16\x03\x01", 3};
    r += static_cast<char>(part.size() >> 8);
    r += static_cast<char>(part.size() & 0xff);
    r += part;
    return r;
  };
  return record(std::string_view{payload}.substr(0, half))
         + record(std::string_view{payload}.substr(half));
}

std::string u16(std::size_t value) {
  return {static_cast<char>(value >> 8), static_cast<char>(value & 0xff)};
}

/// A minimal hand-built ClientHello with the given extensions block.
std::string hand_hello(const std::string& extensions) {
  std::string body{"\x03\x03", 2};
  body += std::string(32, '\0');               // random
  body += '\0';                                // session id
  body += u16(2) + std::string{"\x00\x2f", 2}; // one cipher suite
  body += std::string{"\x01\x00", 2};          // null compression
  body += u16(extensions.size()) + extensions;
  std::string handshake{"\x01", 1};
  handshake += '\0' + u16(body.size());
  handshake += body;
  return std::string{"\x16\x03\x01", 3} + u16(handshake.size()) + handshake;
}

std::string sni_extension(const std::string& name) {
  std::string entry = std::string{"\0", 1} + u16(name.size()) + name;
  std::string list = u16(entry.size()) + entry;
  return std::string{"\0\0", 2} + u16(list.size()) + list;
}

TEST(client_hello, reads_the_server_name_of_an_openssl_client_hello) {
  auto bytes = openssl_client_hello("api.example.com");
  client_hello hello;
  ASSERT_EQ(parse_client_hello(bytes, hello), hello_status::ok);
  EXPECT_TRUE(hello.has_sni);
  EXPECT_EQ(hello.sni, "api.example.com");
}

TEST(client_hello, a_hello_without_server_name_parses_with_has_sni_false) {
  auto bytes = openssl_client_hello(nullptr);
  client_hello hello;
  ASSERT_EQ(parse_client_hello(bytes, hello), hello_status::ok);
  EXPECT_FALSE(hello.has_sni);
  EXPECT_TRUE(hello.sni.empty());
}

TEST(client_hello, every_proper_prefix_needs_more_bytes) {
  auto bytes = openssl_client_hello("api.example.com");
  client_hello hello;
  for (std::size_t size = 1; size < bytes.size(); ++size)
    ASSERT_EQ(parse_client_hello(std::string_view{bytes}.substr(0, size), hello),
              hello_status::need_more)
      << "prefix of " << size << " bytes";
}

TEST(client_hello, a_hello_split_across_two_records_parses) {
  auto bytes = split_into_two_records(openssl_client_hello("files.example.org"));
  client_hello hello;
  ASSERT_EQ(parse_client_hello(bytes, hello), hello_status::ok);
  EXPECT_EQ(hello.sni, "files.example.org");
  EXPECT_EQ(parse_client_hello(std::string_view{bytes}.substr(0, bytes.size() - 1), hello),
            hello_status::need_more);
}

TEST(client_hello, plain_http_and_other_bytes_are_not_tls) {
  client_hello hello;
  EXPECT_EQ(parse_client_hello("GET / HTTP/1.1\r\n", hello), hello_status::not_tls);
  EXPECT_EQ(parse_client_hello(std::string{"\x16\x09", 2}, hello), hello_status::not_tls);
  EXPECT_EQ(parse_client_hello("SSH-2.0-OpenSSH_9.6\r\n", hello), hello_status::not_tls);
}

TEST(client_hello, a_hand_built_hello_with_one_server_name_parses) {
  client_hello hello;
  ASSERT_EQ(parse_client_hello(hand_hello(sni_extension("a.test")), hello), hello_status::ok);
  EXPECT_EQ(hello.sni, "a.test");
  ASSERT_EQ(parse_client_hello(hand_hello(""), hello), hello_status::ok);
  EXPECT_FALSE(hello.has_sni);
}

TEST(client_hello, two_server_name_extensions_are_malformed) {
  client_hello hello;
  auto twice = sni_extension("allowed.test") + sni_extension("other.test");
  EXPECT_EQ(parse_client_hello(hand_hello(twice), hello), hello_status::malformed);
}

TEST(client_hello, lengths_that_overrun_their_container_are_malformed) {
  auto bytes = hand_hello(sni_extension("a.test"));
  // The extension block's own length (two bytes before the extensions) grows by one.
  auto broken = bytes;
  std::size_t ext_len_at = bytes.size() - sni_extension("a.test").size() - 2;
  broken[ext_len_at + 1] = static_cast<char>(broken[ext_len_at + 1] + 1);
  client_hello hello;
  EXPECT_EQ(parse_client_hello(broken, hello), hello_status::malformed);
  auto not_hello = bytes;
  not_hello[5] = 2; // ServerHello in the first handshake byte
  EXPECT_EQ(parse_client_hello(not_hello, hello), hello_status::malformed);
}

TEST(client_hello, a_hello_larger_than_the_bound_is_malformed) {
  // A handshake length of 20000 bytes can never fit in 16 KiB.
  std::string header{"\x16\x03\x01\x40\x00\x01\x00\x4e\x20", 9};
  client_hello hello;
  EXPECT_EQ(parse_client_hello(header, hello), hello_status::malformed);
  // Records that keep coming without ending the hello stop at the bound.
  std::string records;
  std::string handshake_start{"\x01\x00\x3f\xf0", 4};
  std::string first = handshake_start + std::string(1000, 'x');
  records += std::string{"\x16\x03\x01", 3} + u16(first.size()) + first;
  while (records.size() < client_hello_bytes_max) {
    std::string part(1000, 'y');
    records += std::string{"\x16\x03\x01", 3} + u16(part.size()) + part;
  }
  EXPECT_EQ(parse_client_hello(records, hello), hello_status::malformed);
}

} // namespace
} // namespace airlock::worker::egress
