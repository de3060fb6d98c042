#include "worker/egress/credentials.hpp"

#include <gtest/gtest.h>

namespace airlock::worker::egress {
namespace {

using schema::credential_grant;
using schema::credential_scope;
using namespace std::chrono_literals;

credential_grant grant(std::string id, credential_scope scope, std::vector<std::string> hosts,
                       uint32_t rate = 0) {
  credential_grant g;
  g.credential_id = id;
  g.name = "name-" + id;
  g.scope = scope;
  g.hosts = std::move(hosts);
  g.header = "Authorization";
  g.value = "Bearer secret-" + id;
  g.rate_limit_per_min = rate;
  return g;
}

TEST(credentials, host_patterns_match_exact_names_and_strict_subdomains) {
  EXPECT_TRUE(host_matches("api.example.com", "API.example.com"));
  EXPECT_TRUE(host_matches("api.example.com", "api.example.com."));
  EXPECT_FALSE(host_matches("api.example.com", "xapi.example.com"));
  EXPECT_TRUE(host_matches("*.example.com", "a.example.com"));
  EXPECT_TRUE(host_matches("*.example.com", "a.b.example.com"));
  EXPECT_FALSE(host_matches("*.example.com", "example.com"));
  EXPECT_FALSE(host_matches("*.example.com", "badexample.com"));
}

TEST(credentials, the_narrowest_scope_wins_then_the_most_specific_pattern) {
  std::vector<credential_grant> grants{
    grant("tenant", credential_scope::tenant, {"api.example.com"}),
    grant("template-wild", credential_scope::template_name, {"*.example.com"}),
    grant("template-deeper", credential_scope::template_name, {"*.api.example.com"}),
    grant("sandbox", credential_scope::sandbox, {"*.other.org"}),
  };
  ASSERT_NE(select_grant(grants, "api.example.com"), nullptr);
  EXPECT_EQ(select_grant(grants, "api.example.com")->credential_id, "template-wild");
  EXPECT_EQ(select_grant(grants, "v1.api.example.com")->credential_id, "template-deeper");
  EXPECT_EQ(select_grant(grants, "x.other.org")->credential_id, "sandbox");
  EXPECT_EQ(select_grant(grants, "nothing.test"), nullptr);

  std::vector<credential_grant> same_scope{
    grant("wild", credential_scope::tenant, {"*.example.com"}),
    grant("exact", credential_scope::tenant, {"api.example.com"}),
  };
  EXPECT_EQ(select_grant(same_scope, "api.example.com")->credential_id, "exact");
}

TEST(credentials, token_bucket_holds_the_rate_and_refills_per_second) {
  auto start = token_bucket::clock::time_point{} + 1h;
  token_bucket bucket{60, start};
  for (int i = 0; i < 60; ++i)
    ASSERT_TRUE(bucket.try_take(start));
  EXPECT_FALSE(bucket.try_take(start));
  EXPECT_FALSE(bucket.try_take(start + 500ms));
  EXPECT_TRUE(bucket.try_take(start + 1s)); // 60 per minute = one a second
  EXPECT_FALSE(bucket.try_take(start + 1s));
  EXPECT_FALSE(bucket.is_full(start + 30s));
  EXPECT_TRUE(bucket.is_full(start + 2min));
  token_bucket unlimited{0, start};
  for (int i = 0; i < 1000; ++i)
    ASSERT_TRUE(unlimited.try_take(start));
}

TEST(credentials, cache_serves_grants_until_the_ttl_and_limits_per_credential) {
  credential_cache cache{credential_cache_options{.ttl_ms = 30000}};
  auto now = credential_cache::clock::time_point{} + 1h;
  EXPECT_EQ(cache.find("sb_1", now), nullptr);
  cache.store("sb_1", {grant("c1", credential_scope::tenant, {"a.test"}, 2)}, now);
  ASSERT_NE(cache.find("sb_1", now + 29s), nullptr);
  EXPECT_EQ(cache.find("sb_1", now + 30s), nullptr);
  EXPECT_EQ(cache.find("sb_2", now), nullptr);

  auto limited = grant("c1", credential_scope::tenant, {"a.test"}, 2);
  EXPECT_TRUE(cache.try_use(limited, now));
  EXPECT_TRUE(cache.try_use(limited, now));
  EXPECT_FALSE(cache.try_use(limited, now));
  EXPECT_TRUE(cache.try_use(grant("c2", credential_scope::tenant, {"a.test"}, 2), now));
  cache.forget("sb_1");
  EXPECT_EQ(cache.find("sb_1", now), nullptr);
}

TEST(credentials, a_failed_fetch_is_remembered_briefly_then_fetched_again) {
  credential_cache cache{credential_cache_options{.ttl_ms = 30000, .failure_ttl_ms = 2000}};
  auto now = credential_cache::clock::time_point{} + 1h;
  cache.store_failure("sb_1", now);
  auto during = cache.find("sb_1", now + 1999ms);
  ASSERT_NE(during, nullptr) << "requests do not wait for another fetch right away";
  EXPECT_TRUE(during->empty()) << "and go without credentials";
  EXPECT_EQ(cache.find("sb_1", now + 2s), nullptr) << "then the next request fetches again";
  cache.store("sb_1", {grant("c1", credential_scope::tenant, {"a.test"}, 0)}, now + 2s);
  ASSERT_NE(cache.find("sb_1", now + 3s), nullptr);
  EXPECT_EQ(cache.find("sb_1", now + 3s)->size(), 1U);
}

} // namespace
} // namespace airlock::worker::egress
