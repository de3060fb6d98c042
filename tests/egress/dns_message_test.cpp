#include "worker/egress/dns_message.hpp"

#include <gtest/gtest.h>

namespace airlock::worker::egress::dns {
namespace {

std::string header(uint16_t id, uint16_t flags, uint16_t qd) {
  std::string out;
  for (uint16_t v : {id, flags, qd, uint16_t{0}, uint16_t{0}, uint16_t{0}}) {
    out += static_cast<char>(v >> 8);
    out += static_cast<char>(v & 0xff);
  }
  return out;
}

TEST(dns_message, parses_one_question) {
  auto message = header(0xabcd, 0x0100, 1)
                 + std::string("\x03"
                               "api\x07"
                               "example\x00\x00\x01\x00\x01",
                               17);
  auto q = parse_query(message);
  ASSERT_EQ(q.outcome, verdict::query);
  EXPECT_EQ(q.id, 0xabcd);
  EXPECT_EQ(q.name, "api.example");
  EXPECT_EQ(q.qtype, type_a);
  EXPECT_EQ(q.qclass, class_in);
  EXPECT_EQ(q.question.size(), 17u);
}

TEST(dns_message, drops_responses_and_short_messages_and_refuses_other_opcodes) {
  EXPECT_EQ(parse_query("short").outcome, verdict::drop);
  EXPECT_EQ(parse_query(header(1, 0x8000, 1)).outcome, verdict::drop);
  EXPECT_EQ(parse_query(header(1, 0x2800, 1)).outcome, verdict::notimp); // UPDATE
  EXPECT_EQ(parse_query(header(1, 0, 0)).outcome, verdict::formerr);
  EXPECT_EQ(parse_query(header(1, 0, 1)
                        + "\x05"
                          "ab")
              .outcome,
            verdict::formerr);
  std::string too_long = header(1, 0, 1);
  for (int i = 0; i < 5; ++i)
    too_long += "\x3f" + std::string(63, 'a');
  too_long += std::string("\x00\x00\x01\x00\x01", 5);
  EXPECT_EQ(parse_query(too_long).outcome, verdict::formerr);
}

TEST(dns_message, escapes_bytes_that_are_not_name_characters) {
  auto message = header(1, 0, 1)
                 + std::string("\x03"
                               "a.b\x02\x00z\x00\x00\x10\x00\x01",
                               12);
  auto q = parse_query(message);
  ASSERT_EQ(q.outcome, verdict::query);
  EXPECT_EQ(q.name, "a\\046b.\\000z");
  EXPECT_EQ(type_name(q.qtype), "TXT");
  EXPECT_EQ(type_name(4242), "TYPE4242");
}

TEST(dns_message, builds_answers_and_sets_tc_when_they_do_not_fit) {
  auto q = parse_query(header(9, 0x0100, 1)
                       + std::string("\x01"
                                     "a\x00\x00\x01\x00\x01",
                                     7));
  std::vector<uint32_t> two{0x01020304, 0x05060708};
  auto full = build_response(q, rcode::noerror, two, 30, 512);
  EXPECT_EQ(full.size(), 12u + 7u + 32u);
  EXPECT_EQ(static_cast<uint8_t>(full[2]) & 0x80, 0x80); // QR
  EXPECT_EQ(static_cast<uint8_t>(full[2]) & 0x01, 0x01); // RD copied
  EXPECT_EQ(full[7], 2);
  auto cut = build_response(q, rcode::noerror, two, 30, 12 + 7 + 20);
  EXPECT_EQ(static_cast<uint8_t>(cut[2]) & 0x02, 0x02); // TC
  EXPECT_EQ(cut[7], 0);
  EXPECT_EQ(answers_that_fit(q, 12 + 7 + 32), 2u);
}

} // namespace
} // namespace airlock::worker::egress::dns
