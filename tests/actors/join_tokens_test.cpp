#include "actors/join_tokens.hpp"

#include <gtest/gtest.h>

#include "storage/kv_store.hpp"

namespace airlock::actors {
namespace {

const std::string fingerprint(64, 'c');

struct join_tokens_test : ::testing::Test {
  std::unique_ptr<storage::kv_store> store = storage::make_memory_store();
  manual_wall_clock clock;
  join_token_book book{*store, clock};

  join_token create(int64_t ttl_s = 600) {
    auto made = book.create("rack-7", ttl_s, fingerprint);
    EXPECT_TRUE(made) << made.error().message;
    return made->first;
  }
  result<std::string> redeem(const join_token& token, std::string_view csr,
                             std::string_view worker = "wk_a") {
    return book.redeem(token.token_id, join_request_mac(token.mac_key(), token.token_id, csr, "n"),
                       csr, "n", worker);
  }
};

TEST_F(join_tokens_test, a_token_reads_back_from_its_text_and_keeps_no_secret_in_the_store) {
  auto token = create();
  auto parsed = parse_join_token(token.text());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->token_id, token.token_id);
  EXPECT_EQ(parsed->secret_hex, token.secret_hex);
  EXPECT_EQ(parsed->ca_sha256, fingerprint);
  auto stored = store->get(storage::keyspace::join_tokens, token.token_id);
  ASSERT_TRUE(stored && stored->has_value());
  EXPECT_EQ((*stored)->find(token.secret_hex), std::string::npos);
}

TEST_F(join_tokens_test, a_token_admits_one_worker_then_says_it_was_used_and_by_whom) {
  auto token = create();
  auto key = redeem(token, "csr-1");
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(*key, token.mac_key());
  auto again = redeem(token, "csr-2", "wk_b");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, errc::permission_denied);
  EXPECT_NE(again.error().message.find("used already (by wk_a)"), std::string::npos)
    << again.error().message;
}

TEST_F(join_tokens_test, an_expired_token_is_refused_and_says_so) {
  auto token = create(60);
  clock.advance_ms(60'000);
  auto late = redeem(token, "csr");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, errc::permission_denied);
  EXPECT_NE(late.error().message.find("expired"), std::string::npos);
}

TEST_F(join_tokens_test, a_wrong_mac_or_unknown_id_is_one_answer_and_consumes_nothing) {
  auto token = create();
  auto forged =
    book.redeem(token.token_id, join_request_mac("not the key", token.token_id, "csr", "n"), "csr",
                "n", "wk_x");
  ASSERT_FALSE(forged);
  EXPECT_EQ(forged.error().code, errc::unauthenticated);
  // A MAC of other parts than those presented (a swapped CSR) is refused too.
  auto swapped =
    book.redeem(token.token_id, join_request_mac(token.mac_key(), token.token_id, "csr", "n"),
                "another csr", "n", "wk_x");
  ASSERT_FALSE(swapped);
  EXPECT_EQ(swapped.error().code, errc::unauthenticated);
  auto unknown = book.redeem("0000000000000000", "00", "x", "n", "wk_x");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, errc::unauthenticated);
  EXPECT_EQ(unknown.error().message, forged.error().message);
  EXPECT_FALSE(book.redeem("../../etc", "00", "x", "n", "wk_x"));
  // The rightful worker still gets in.
  EXPECT_TRUE(redeem(token, "csr"));
}

TEST_F(join_tokens_test, lifetimes_names_and_token_shapes_out_of_bounds_are_refused) {
  EXPECT_FALSE(book.create("x", join_token_ttl_min_s - 1, fingerprint));
  EXPECT_FALSE(book.create("x", join_token_ttl_max_s + 1, fingerprint));
  EXPECT_FALSE(book.create(std::string(join_token_name_max + 1, 'n'), 600, fingerprint));
  EXPECT_FALSE(book.create("tab\there", 600, fingerprint));
  EXPECT_FALSE(book.create("x", 600, "not hex"));
  auto token = create().text();
  for (const std::string& bad :
       {std::string(), std::string("alj_"), token.substr(1), token + "0",
        "alj_" + std::string(16, 'G') + token.substr(20), std::string("ak_") + token.substr(4)}) {
    auto parsed = parse_join_token(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code, errc::invalid_argument);
  }
}

TEST_F(join_tokens_test, macs_bind_the_order_and_boundaries_of_their_parts) {
  EXPECT_NE(join_mac("k", {"ab", "c"}), join_mac("k", {"a", "bc"}));
  EXPECT_NE(join_mac("k", {"a", "b"}), join_mac("k", {"b", "a"}));
  EXPECT_EQ(join_mac("k", {"a", "b"}), join_mac("k", {"a", "b"}));
  EXPECT_TRUE(join_mac_equal("abcd", "abcd"));
  EXPECT_FALSE(join_mac_equal("abcd", "abce"));
  EXPECT_FALSE(join_mac_equal("abcd", "abc"));
}

} // namespace
} // namespace airlock::actors
