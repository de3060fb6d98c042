// Signed envd file URLs: the signature matches the SDK's (known answers
// computed with Python's hashlib from the SDK's formula), and the book finds
// the sandbox whose token signed a URL, within its bounds and expiries.

#include <gtest/gtest.h>

#include "gateway/e2b_token_book.hpp"

namespace airlock::gateway {
namespace {

TEST(envd_file_signature, matches_the_sdks_formula) {
  EXPECT_EQ(envd_file_signature({"/root/a.txt", "read", "", "", ""}, "tok_1"),
            "v1_5lsdtTi6q9BCFv3Ai3wTrGDnuJ2xA98WaG4g/EBH5Es");
  EXPECT_EQ(envd_file_signature({"a.txt", "write", "user", "", "1700000100"}, "tok_2"),
            "v1_m1IfBhNl1Dc3eitMKgE44fiqEJ6AItbnCP7dV5ZzrNw");
}

signed_file_request signed_by(std::string_view token, std::string path, std::string operation) {
  signed_file_request request{std::move(path), std::move(operation), "", "", ""};
  request.signature = envd_file_signature(request, token);
  return request;
}

TEST(envd_token_book, finds_the_sandbox_whose_token_signed) {
  envd_token_book book;
  book.remember("sb_a", "tok_a", 2000);
  book.remember("sb_b", "tok_b", 2000);
  auto found = book.find(signed_by("tok_b", "/x", "read"), 1000);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->sandbox_id, "sb_b");
  EXPECT_EQ(found->token, "tok_b");
  EXPECT_FALSE(book.find(signed_by("tok_c", "/x", "read"), 1000)) << "a token never handed out";
  auto changed = signed_by("tok_a", "/x", "read");
  changed.path = "/y";
  EXPECT_FALSE(book.find(changed, 1000)) << "the signature covers the path";
  changed = signed_by("tok_a", "/x", "read");
  changed.operation = "write";
  EXPECT_FALSE(book.find(changed, 1000)) << "and the operation";
}

TEST(envd_token_book, forgets_expired_tokens_and_keeps_its_bound) {
  envd_token_book book(2);
  book.remember("sb_a", "tok_a", 2000);
  EXPECT_TRUE(book.find(signed_by("tok_a", "/x", "read"), 1999));
  EXPECT_FALSE(book.find(signed_by("tok_a", "/x", "read"), 2000)) << "expired";
  book.remember("sb_b", "tok_b", 5000);
  book.remember("sb_c", "tok_c", 5000);
  EXPECT_EQ(book.size(), 2u);
  EXPECT_FALSE(book.find(signed_by("tok_a", "/x", "read"), 1000)) << "the oldest went first";
  EXPECT_TRUE(book.find(signed_by("tok_c", "/x", "read"), 1000));
}

} // namespace
} // namespace airlock::gateway
