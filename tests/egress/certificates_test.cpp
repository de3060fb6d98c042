#include "crypto/certificates.hpp"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

namespace airlock::crypto {
namespace {

struct store_free {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct ctx_free {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct stack_free {
  void operator()(STACK_OF(X509) * s) const { sk_X509_free(s); }
};

std::shared_ptr<X509> parse_cert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
    BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return {PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free};
}

/// X509_verify_cert of `leaf` against `root` with the chain as untrusted
/// intermediates and a host name check; the verify error, X509_V_OK when good.
int verify(const leaf_minter::leaf& leaf, X509* root, const std::string& host) {
  std::unique_ptr<X509_STORE, store_free> store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), root);
  std::unique_ptr<STACK_OF(X509), stack_free> untrusted(sk_X509_new_null());
  for (const auto& c : leaf.chain)
    sk_X509_push(untrusted.get(), c.get());
  std::unique_ptr<X509_STORE_CTX, ctx_free> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.cert.get(), untrusted.get());
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (X509_verify_cert(ctx.get()) == 1)
    return X509_V_OK;
  return X509_STORE_CTX_get_error(ctx.get());
}

/// A root, a worker key and an intermediate for it, and a minter.
struct ca_fixture {
  key_and_cert root;
  std::string worker_key;
  std::string intermediate;
  std::unique_ptr<leaf_minter> minter;

  explicit ca_fixture(size_t cache_max = 1024) {
    root = *create_root_ca("airlock test root", 30);
    worker_key = *generate_key_pem();
    auto issued = issue_intermediate(root, *public_key_pem(worker_key), "airlock worker wk_1", 30);
    EXPECT_TRUE(issued) << issued.error().message;
    intermediate = *issued;
    auto made = leaf_minter::create(worker_key, intermediate + root.cert_pem, cache_max);
    EXPECT_TRUE(made) << made.error().message;
    minter = std::move(*made);
  }
};

TEST(certificates, a_minted_leaf_verifies_against_the_root_for_its_name_only) {
  ca_fixture ca;
  auto root = parse_cert(ca.root.cert_pem);
  ASSERT_TRUE(root);
  EXPECT_EQ(X509_check_ca(root.get()), 1);
  auto leaf = ca.minter->for_name("API.Example.com.");
  ASSERT_TRUE(leaf) << leaf.error().message;
  ASSERT_EQ(leaf->chain.size(), 2u);
  EXPECT_EQ(X509_check_private_key(leaf->cert.get(), leaf->key.get()), 1);
  EXPECT_EQ(verify(*leaf, root.get(), "api.example.com"), X509_V_OK);
  EXPECT_EQ(verify(*leaf, root.get(), "other.example.com"), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(X509_check_ca(leaf->cert.get()), 0);
}

TEST(certificates, a_leaf_does_not_verify_against_another_root) {
  ca_fixture ca;
  auto stranger = parse_cert(create_root_ca("someone else", 30)->cert_pem);
  auto leaf = ca.minter->for_name("api.example.com");
  ASSERT_TRUE(leaf);
  EXPECT_NE(verify(*leaf, stranger.get(), "api.example.com"), X509_V_OK);
}

TEST(certificates, a_leaf_is_valid_about_seven_days_from_an_hour_ago) {
  ca_fixture ca;
  auto leaf = ca.minter->for_name("api.example.com");
  ASSERT_TRUE(leaf);
  int days = 0;
  int seconds = 0;
  ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notBefore(leaf->cert.get())), 1);
  EXPECT_EQ(days, 0);
  EXPECT_LE(seconds, -3500);
  EXPECT_GE(seconds, -3700);
  ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(leaf->cert.get())), 1);
  EXPECT_TRUE(days == 7 || (days == 6 && seconds > 86000)) << days << " " << seconds;
}

TEST(certificates, the_intermediate_cannot_sign_further_cas) {
  ca_fixture ca;
  auto cert = parse_cert(ca.intermediate);
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  auto usage = X509_get_key_usage(cert.get());
  EXPECT_TRUE(usage & KU_KEY_CERT_SIGN);
  EXPECT_EQ(X509_get_pathlen(cert.get()), 0);
}

TEST(certificates, the_minter_caches_leaves_and_evicts_the_least_recently_used) {
  ca_fixture ca(2);
  auto a1 = ca.minter->for_name("a.example");
  auto a2 = ca.minter->for_name("A.EXAMPLE");
  ASSERT_TRUE(a1 && a2);
  EXPECT_EQ(a1->cert.get(), a2->cert.get());
  EXPECT_EQ(ca.minter->minted(), 1u);
  ASSERT_TRUE(ca.minter->for_name("b.example"));
  ASSERT_TRUE(ca.minter->for_name("a.example")); // a is now the most recent
  ASSERT_TRUE(ca.minter->for_name("c.example")); // evicts b
  EXPECT_EQ(ca.minter->minted(), 3u);
  ASSERT_TRUE(ca.minter->for_name("a.example"));
  EXPECT_EQ(ca.minter->minted(), 3u);
  ASSERT_TRUE(ca.minter->for_name("b.example"));
  EXPECT_EQ(ca.minter->minted(), 4u);
}

TEST(certificates, the_minter_refuses_addresses_and_bad_names) {
  ca_fixture ca;
  for (std::string_view bad : {"1.2.3.4", "[::1]", "a,DNS:evil.example", "", "*.example.com"})
    EXPECT_EQ(ca.minter->for_name(bad).code(), errc::invalid_argument) << bad;
}

TEST(certificates, the_minter_refuses_a_key_that_does_not_match_the_chain) {
  ca_fixture ca;
  auto other_key = *generate_key_pem();
  EXPECT_EQ(leaf_minter::create(other_key, ca.intermediate).code(), errc::invalid_argument);
  EXPECT_EQ(leaf_minter::create(ca.worker_key, "not pem").code(), errc::invalid_argument);
  EXPECT_EQ(leaf_minter::create("not pem", ca.intermediate).code(), errc::invalid_argument);
}

TEST(certificates, issuing_refuses_bad_input) {
  auto root = *create_root_ca("root", 1);
  auto pub = *public_key_pem(*generate_key_pem());
  EXPECT_EQ(issue_intermediate(root, "junk", "x", 1).code(), errc::invalid_argument);
  EXPECT_EQ(issue_intermediate(root, pub, "", 1).code(), errc::invalid_argument);
  EXPECT_EQ(issue_intermediate(root, pub, "x", 0).code(), errc::invalid_argument);
  auto mismatched = root;
  mismatched.key_pem = *generate_key_pem();
  EXPECT_EQ(issue_intermediate(mismatched, pub, "x", 1).code(), errc::invalid_argument);
  EXPECT_EQ(public_key_pem("junk").code(), errc::invalid_argument);
  EXPECT_EQ(create_root_ca("", 1).code(), errc::invalid_argument);
}

TEST(certificates, the_minter_is_safe_to_share_between_threads) {
  ca_fixture ca(8);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&ca, &failures, t] {
      for (int i = 0; i < 50; ++i)
        if (!ca.minter->for_name("h" + std::to_string((i + t) % 12) + ".example"))
          ++failures;
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(ca.minter->minted(), 12u);
}

} // namespace
} // namespace airlock::crypto
