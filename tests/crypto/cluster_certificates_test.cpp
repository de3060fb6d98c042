#include "crypto/cluster_certificates.hpp"

#include <gtest/gtest.h>

#include <ctime>

namespace airlock::crypto {
namespace {

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

struct member_fixture : ::testing::Test {
  key_and_cert ca = *create_root_ca("airlock worker CA", 365);
  std::string key = *generate_key_pem();
  std::string csr = *create_csr(key, "wk_0123456789abcdef");
};

TEST_F(member_fixture, a_request_reads_back_its_name_and_key) {
  auto subject = read_csr(csr);
  ASSERT_TRUE(subject) << subject.error().message;
  EXPECT_EQ(subject->common_name, "wk_0123456789abcdef");
  EXPECT_EQ(subject->public_key_pem, *public_key_pem(key));
}

TEST_F(member_fixture, the_issued_certificate_names_the_member_the_issuer_chose_and_verifies) {
  auto cert = issue_member_certificate(ca, csr, "wk_chosen", 30, {"10.0.0.7", "::1"});
  ASSERT_TRUE(cert) << cert.error().message;
  auto member = verify_member_certificate(ca.cert_pem, *cert, now_s());
  ASSERT_TRUE(member) << member.error().message;
  EXPECT_EQ(member->name, "wk_chosen");
  EXPECT_FALSE(member->serial_hex.empty());
  EXPECT_NEAR(static_cast<double>(member->not_after_s), static_cast<double>(now_s() + 30 * 86400),
              120.0);
  EXPECT_EQ(*certificate_not_after(*cert), member->not_after_s);
  EXPECT_TRUE(key_matches_certificate(key, *cert));
  EXPECT_FALSE(key_matches_certificate(*generate_key_pem(), *cert));
  EXPECT_FALSE(key_matches_certificate("garbage", *cert));
}

TEST_F(member_fixture, the_addresses_a_request_asks_for_are_named_in_the_certificate) {
  auto asked = create_csr(key, "wk_0123456789abcdef", {"10.0.0.9", "fd00::2"});
  ASSERT_TRUE(asked) << asked.error().message;
  auto subject = read_csr(*asked);
  ASSERT_TRUE(subject) << subject.error().message;
  EXPECT_EQ(subject->ip_addresses, (std::vector<std::string>{"10.0.0.9", "fd00::2"}));
  auto cert = issue_member_certificate(ca, *asked, "wk_a", 1, {"127.0.0.1"});
  ASSERT_TRUE(cert) << cert.error().message;
  EXPECT_EQ(certificate_ip_addresses(*cert),
            (std::vector<std::string>{"10.0.0.9", "fd00::2", "127.0.0.1"}));
  EXPECT_TRUE(certificate_ip_addresses(*issue_member_certificate(ca, csr, "wk_a", 1)).empty());
  EXPECT_TRUE(certificate_ip_addresses("garbage").empty());

  EXPECT_EQ(create_csr(key, "wk_a", {"example.com"}).code(), errc::invalid_argument);
  std::vector<std::string> many(member_addresses_max + 1, "10.0.0.1");
  EXPECT_EQ(create_csr(key, "wk_a", many).code(), errc::invalid_argument);
}

TEST_F(member_fixture, another_ca_an_expired_certificate_and_a_ca_are_refused_with_a_reason) {
  auto cert = *issue_member_certificate(ca, csr, "wk_a", 1);
  auto other = *create_root_ca("another CA", 365);
  auto foreign = verify_member_certificate(other.cert_pem, cert, now_s());
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code, errc::permission_denied);
  EXPECT_NE(foreign.error().message.find("unable to get local issuer"), std::string::npos)
    << foreign.error().message;
  auto later = verify_member_certificate(ca.cert_pem, cert, now_s() + 3 * 86400);
  ASSERT_FALSE(later);
  EXPECT_NE(later.error().message.find("expired"), std::string::npos) << later.error().message;
  auto root = verify_member_certificate(ca.cert_pem, ca.cert_pem, now_s());
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().code, errc::permission_denied);
}

TEST_F(member_fixture, malformed_requests_are_refused_with_a_sentence) {
  const std::string cases[] = {
    "",
    "not pem at all",
    "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
    csr + csr,                         // two requests
    std::string(csr_pem_max + 1, 'A'), // too large
    ca.cert_pem,                       // a certificate, not a request
  };
  for (const auto& bad : cases) {
    auto read = read_csr(bad);
    ASSERT_FALSE(read) << bad.substr(0, 40);
    EXPECT_EQ(read.error().code, errc::invalid_argument);
    EXPECT_FALSE(read.error().message.empty());
    EXPECT_FALSE(issue_member_certificate(ca, bad, "wk_a", 1));
  }
}

TEST_F(member_fixture, a_request_whose_signature_was_tampered_with_is_refused) {
  // Flip a character inside the base64 body, well past the header: the
  // request still parses but no longer matches its signature, or no longer
  // parses; either way it is refused.
  std::string tampered = csr;
  const size_t at = tampered.find('\n') + 40;
  tampered[at] = tampered[at] == 'A' ? 'B' : 'A';
  auto read = read_csr(tampered);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, errc::invalid_argument);
}

TEST_F(member_fixture, names_and_addresses_are_checked_before_anything_is_signed) {
  EXPECT_FALSE(create_csr(key, "Upper"));
  EXPECT_FALSE(create_csr(key, ""));
  EXPECT_FALSE(create_csr(key, std::string(64, 'a')));
  EXPECT_FALSE(issue_member_certificate(ca, csr, "-dash-first", 1));
  EXPECT_FALSE(issue_member_certificate(ca, csr, "wk_a,DNS:evil", 1));
  auto bad_ip = issue_member_certificate(ca, csr, "wk_a", 1, {"10.0.0.1,DNS:evil.example"});
  ASSERT_FALSE(bad_ip);
  EXPECT_EQ(bad_ip.error().code, errc::invalid_argument);
  EXPECT_FALSE(issue_member_certificate(ca, csr, "wk_a", 0));
  EXPECT_TRUE(is_member_name("wk_0123456789abcdef"));
  EXPECT_TRUE(is_member_name("control-plane"));
  EXPECT_FALSE(is_member_name("a.b"));
}

TEST_F(member_fixture, the_fingerprint_is_of_the_public_key_and_tells_cas_apart) {
  auto fingerprint = public_key_fingerprint(ca.cert_pem);
  ASSERT_TRUE(fingerprint) << fingerprint.error().message;
  EXPECT_EQ(fingerprint->rfind("sha256:", 0), 0U);
  EXPECT_EQ(fingerprint->size(), 7U + 64U);
  EXPECT_EQ(*public_key_fingerprint(ca.cert_pem), *fingerprint);
  EXPECT_NE(*public_key_fingerprint(create_root_ca("another CA", 365)->cert_pem), *fingerprint);
  EXPECT_FALSE(public_key_fingerprint("garbage"));
}

} // namespace
} // namespace airlock::crypto

namespace airlock::crypto {
namespace {

TEST_F(member_fixture, a_certificate_with_a_window_in_the_past_is_refused_as_expired) {
  // Inside the CA's own validity (it starts an hour back), ended a minute ago.
  auto expired = issue_member_certificate_between(ca, csr, "wk_a", now_s() - 3000, now_s() - 60);
  ASSERT_TRUE(expired) << expired.error().message;
  auto checked = verify_member_certificate(ca.cert_pem, *expired, now_s());
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().message.find("expired"), std::string::npos);
  EXPECT_TRUE(verify_member_certificate(ca.cert_pem, *expired, now_s() - 1000));
  EXPECT_FALSE(issue_member_certificate_between(ca, csr, "wk_a", now_s(), now_s()));
}

TEST_F(member_fixture, a_signature_verifies_with_the_certificate_of_its_key_only) {
  auto cert = *issue_member_certificate(ca, csr, "wk_a", 1);
  auto signature = sign_message(key, "register wk_a");
  ASSERT_TRUE(signature) << signature.error().message;
  EXPECT_TRUE(verify_message(cert, "register wk_a", *signature));
  EXPECT_FALSE(verify_message(cert, "register wk_b", *signature));
  auto other_key = *generate_key_pem();
  EXPECT_FALSE(verify_message(cert, "register wk_a", *sign_message(other_key, "register wk_a")));
  EXPECT_FALSE(verify_message(cert, "register wk_a", "zz"));
  EXPECT_FALSE(verify_message(cert, "register wk_a", ""));
  EXPECT_FALSE(verify_message("garbage", "register wk_a", *signature));
  EXPECT_FALSE(sign_message("garbage", "x"));
}

} // namespace
} // namespace airlock::crypto
