// Round trips of the egress records (schema/egress.hpp): credentials as
// stored, grants as sent to a worker, audit records; decoders refuse what
// they cannot trust.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include "schema/egress.capnp.h"
#include "schema/egress.hpp"

namespace airlock::schema {
namespace {

credential_record sample_credential() {
  credential_record x;
  x.id = "cred_1";
  x.tenant_id = "acme";
  x.name = "openai";
  x.scope = credential_scope::template_name;
  x.scope_value = "python";
  x.hosts = {"api.openai.com", "*.openai.com:443"};
  x.header = "Authorization";
  x.value_template = "Bearer {secret}";
  x.rate_limit_per_min = 600;
  x.sealed_secret = std::string("\0\x01\xff sealed", 10);
  x.created_at_ms = 1'700'000'000'123;
  return x;
}

TEST(egress_codec, round_trips_a_stored_credential_with_binary_sealed_secret) {
  auto x = sample_credential();
  auto decoded = decode_credential(encode(x));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, x);
}

TEST(egress_codec, round_trips_a_grant_and_an_audit_record) {
  credential_grant grant{
    "cred_2", "gh", credential_scope::sandbox, {"api.github.com"}, "Authorization", "token abc", 0};
  auto g = decode_credential_grant(encode(grant));
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(*g, grant);
  audit_record audit{
    42, "acme", "sb_1", "egress", "denied", "host not in allow list", "evil.example:443", "GET /"};
  auto a = decode_audit_record(encode(audit));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(*a, audit);
}

TEST(egress_codec, refuses_garbage_a_newer_version_and_an_unknown_scope) {
  EXPECT_EQ(decode_credential("not a record").code(), errc::corrupt_record);
  EXPECT_EQ(decode_audit_record("").code(), errc::corrupt_record);
  {
    capnp::MallocMessageBuilder message;
    message.initRoot<capnp_schema::Credential>().setSchemaVersion(egress_schema_version + 1);
    auto words = capnp::messageToFlatArray(message);
    auto bytes = words.asBytes();
    std::string text(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
    EXPECT_EQ(decode_credential(text).code(), errc::unsupported_version);
  }
  {
    capnp::MallocMessageBuilder message;
    auto root = message.initRoot<capnp_schema::CredentialGrant>();
    root.setSchemaVersion(egress_schema_version);
    root.setScope(static_cast<capnp_schema::CredentialScope>(7));
    auto words = capnp::messageToFlatArray(message);
    auto bytes = words.asBytes();
    std::string text(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
    EXPECT_EQ(decode_credential_grant(text).code(), errc::unsupported_version);
  }
}

TEST(egress_codec, scope_names_parse_back) {
  for (auto scope :
       {credential_scope::tenant, credential_scope::template_name, credential_scope::sandbox})
    EXPECT_EQ(parse_credential_scope(to_string(scope)), scope);
  EXPECT_EQ(parse_credential_scope("template_name"), std::nullopt);
}

} // namespace
} // namespace airlock::schema
