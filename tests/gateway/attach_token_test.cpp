// Data-plane tokens: what a worker accepts and refuses, and the key file.

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "gateway/attach_token.hpp"
#include "tests/support/host.hpp"

namespace airlock::gateway {
namespace {

constexpr int64_t now_ms = 1'800'000'000'000;

using airlock::test::temp_dir;

token_claims sandbox_claims(std::string scope = "all", std::string process = "") {
  return token_claims{"tenant_a",       "sb_1",          std::move(process),
                      std::move(scope), now_ms + 60'000, "wk_a"};
}

class attach_token : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto signer = token_signer::load_or_create(dir_.path() + "/keys/token.pem");
    ASSERT_TRUE(signer) << signer.error().message;
    signer_.emplace(std::move(*signer));
    auto verifier = token_verifier::from_public_key(signer_->public_key());
    ASSERT_TRUE(verifier) << verifier.error().message;
    verifier_.emplace(std::move(*verifier));
  }

  temp_dir dir_;
  std::optional<token_signer> signer_;
  std::optional<token_verifier> verifier_;
};

/// The token with one character at `index` replaced by another base64url one.
std::string flip(std::string token, size_t index) {
  token[index] = token[index] == 'A' ? 'B' : 'A';
  return token;
}

TEST_F(attach_token, round_trips_its_claims) {
  auto claims = sandbox_claims("processes", "proc_7");
  auto token = signer_->sign(claims);
  EXPECT_TRUE(token.starts_with("v1."));
  auto checked = verifier_->verify(token, now_ms, "sb_1", "processes", "proc_7");
  ASSERT_TRUE(checked) << checked.error().message;
  EXPECT_EQ(checked->tenant_id, "tenant_a");
  EXPECT_EQ(checked->sandbox_id, "sb_1");
  EXPECT_EQ(checked->process_id, "proc_7");
  EXPECT_EQ(checked->scope, "processes");
  EXPECT_EQ(checked->expires_at_ms, claims.expires_at_ms);
  EXPECT_EQ(checked->audience, "wk_a");
}

TEST_F(attach_token, rejects_a_token_whose_payload_was_altered) {
  auto token = signer_->sign(sandbox_claims());
  auto forged = verifier_->verify(flip(token, 5), now_ms, "sb_1", "files");
  ASSERT_FALSE(forged);
  EXPECT_EQ(forged.code(), errc::unauthenticated);
}

TEST_F(attach_token, rejects_a_token_whose_signature_was_altered) {
  auto token = signer_->sign(sandbox_claims());
  // Index 10 of the 86-character signature: a whole byte of it changes.
  auto forged = verifier_->verify(flip(token, token.rfind('.') + 10), now_ms, "sb_1", "files");
  ASSERT_FALSE(forged);
  EXPECT_EQ(forged.code(), errc::unauthenticated);
}

TEST_F(attach_token, rejects_a_token_signed_with_another_key) {
  auto other = token_signer::load_or_create(dir_.path() + "/other.pem");
  ASSERT_TRUE(other);
  EXPECT_NE(other->public_key(), signer_->public_key());
  auto checked = verifier_->verify(other->sign(sandbox_claims()), now_ms, "sb_1", "files");
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.code(), errc::unauthenticated);
}

TEST_F(attach_token, rejects_a_token_from_its_expiry_instant_on) {
  auto token = signer_->sign(sandbox_claims());
  EXPECT_TRUE(verifier_->verify(token, now_ms + 59'999, "sb_1", "files"));
  auto expired = verifier_->verify(token, now_ms + 60'000, "sb_1", "files");
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.code(), errc::unauthenticated);
  EXPECT_NE(expired.error().message.find("expired"), std::string::npos);
}

TEST_F(attach_token, rejects_a_token_for_another_sandbox) {
  auto checked = verifier_->verify(signer_->sign(sandbox_claims()), now_ms, "sb_2", "files");
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.code(), errc::unauthenticated);
}

// A worker takes only tokens minted for itself: a token that leaks from one
// worker (or that a compromised worker replays) opens nothing elsewhere.
TEST_F(attach_token, a_worker_refuses_a_token_minted_for_another_worker) {
  auto for_worker = [this](const std::string& audience) {
    token_verifier_options options;
    options.audience = audience;
    auto verifier = token_verifier::from_public_key(signer_->public_key(), options);
    EXPECT_TRUE(verifier) << verifier.error().message;
    return std::move(*verifier);
  };
  const auto token = signer_->sign(sandbox_claims());
  auto other = for_worker("wk_b").verify(token, now_ms, "sb_1", "files");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.code(), errc::unauthenticated);
  EXPECT_NE(other.error().message.find("another worker"), std::string::npos)
    << other.error().message;
  EXPECT_TRUE(for_worker("wk_a").verify(token, now_ms, "sb_1", "files")) << "its own worker";
  EXPECT_TRUE(verifier_->verify(token, now_ms, "sb_1", "files"))
    << "a verifier without an audience (the control plane's) takes any";
  // A token minted with no audience is for no worker.
  auto claims = sandbox_claims();
  claims.audience.clear();
  EXPECT_FALSE(for_worker("wk_a").verify(signer_->sign(claims), now_ms, "sb_1", "files"));
}

TEST_F(attach_token, denies_a_scope_the_token_does_not_cover) {
  auto files_only = signer_->sign(sandbox_claims("files"));
  EXPECT_TRUE(verifier_->verify(files_only, now_ms, "sb_1", "files"));
  auto checked = verifier_->verify(files_only, now_ms, "sb_1", "processes");
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.code(), errc::permission_denied);
  auto all = signer_->sign(sandbox_claims("all"));
  EXPECT_TRUE(verifier_->verify(all, now_ms, "sb_1", "processes"));
}

TEST_F(attach_token, denies_a_process_token_for_another_process_or_no_process) {
  auto token = signer_->sign(sandbox_claims("processes", "proc_1"));
  auto other = verifier_->verify(token, now_ms, "sb_1", "processes", "proc_2");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.code(), errc::permission_denied);
  auto none = verifier_->verify(token, now_ms, "sb_1", "processes");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.code(), errc::permission_denied);
  // A sandbox-wide token serves any process.
  auto wide = signer_->sign(sandbox_claims("processes"));
  EXPECT_TRUE(verifier_->verify(wide, now_ms, "sb_1", "processes", "proc_2"));
}

TEST_F(attach_token, rejects_malformed_strings_without_quoting_them) {
  auto token = signer_->sign(sandbox_claims());
  auto dot = token.rfind('.');
  const std::string bad[] = {
    "",
    "v1.",
    "v1..",
    "v2" + token.substr(2),
    token.substr(0, dot),                               // no signature
    token.substr(0, dot + 1),                           // empty signature
    token + "A",                                        // signature of 65 characters
    token.substr(0, 3) + "!" + token.substr(4),         // not base64url
    token.substr(0, dot) + "." + token.substr(dot + 2), // signature one character short
    "v1.e30." + token.substr(dot + 1),                  // "{}" with another payload's signature
    token + "." + token,
    std::string(5000, 'v'),
  };
  for (const auto& text : bad) {
    auto checked = verifier_->verify(text, now_ms, "sb_1", "files");
    ASSERT_FALSE(checked) << text;
    EXPECT_EQ(checked.code(), errc::unauthenticated) << text;
    if (text.size() > 8) {
      EXPECT_EQ(checked.error().message.find(text), std::string::npos);
    }
  }
}

TEST_F(attach_token, rejects_a_public_key_that_is_not_32_bytes_of_base64url) {
  EXPECT_EQ(token_verifier::from_public_key("").code(), errc::invalid_argument);
  EXPECT_EQ(token_verifier::from_public_key("abc").code(), errc::invalid_argument);
  auto key = signer_->public_key();
  EXPECT_EQ(key.size(), 43u);
  EXPECT_EQ(token_verifier::from_public_key(key + "AAAA").code(), errc::invalid_argument);
  EXPECT_EQ(token_verifier::from_public_key(key.substr(0, 42) + "=").code(),
            errc::invalid_argument);
}

TEST_F(attach_token, creates_its_key_file_with_mode_0600_and_reloads_the_same_key) {
  std::string path = dir_.path() + "/keys/token.pem";
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_.path() + "/keys").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);

  auto reloaded = token_signer::load_or_create(path);
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  EXPECT_EQ(reloaded->public_key(), signer_->public_key());
  // A token from the reloaded signer verifies with the first public key.
  EXPECT_TRUE(verifier_->verify(reloaded->sign(sandbox_claims()), now_ms, "sb_1", "files"));
}

TEST_F(attach_token, refuses_a_key_file_that_holds_no_ed25519_key) {
  std::string path = dir_.path() + "/garbage.pem";
  std::ofstream(path) << "not a key\n";
  auto loaded = token_signer::load_or_create(path);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.code(), errc::invalid_argument);
}

} // namespace
} // namespace airlock::gateway
