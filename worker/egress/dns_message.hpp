#pragma once
// The small part of the DNS wire format (RFC 1035) the egress resolver
// speaks: one question in, A records (or nothing) out. Pure functions, no
// sockets, so the parser can be tested against hostile bytes directly.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::worker::egress::dns {

inline constexpr size_t header_bytes = 12;
inline constexpr uint16_t type_a = 1;
inline constexpr uint16_t type_aaaa = 28;
inline constexpr uint16_t class_in = 1;

enum class rcode : uint8_t {
  noerror = 0,
  formerr = 1,
  servfail = 2,
  nxdomain = 3,
  notimp = 4,
  refused = 5
};

/// What to do with a message.
enum class verdict : uint8_t {
  query,   ///< a well-formed standard query with one question
  drop,    ///< not worth an answer: too short to echo an id, or a response (QR=1)
  formerr, ///< answer FORMERR: no or several questions, a bad name, short question
  notimp,  ///< answer NOTIMP: an opcode other than QUERY
};

struct query {
  verdict outcome = verdict::drop;
  uint16_t id = 0;
  uint16_t flags = 0;
  /// The question's name as text, labels joined by '.', without a trailing
  /// dot. Bytes outside [A-Za-z0-9_-] are written as \DDD (as dig does), so
  /// a label holding a '.' or a control byte never reads as a valid name.
  std::string name;
  uint16_t qtype = 0;
  uint16_t qclass = 0;
  std::string question; ///< the question section as received, echoed in the answer
};

/// Parses a query message. Never reads past `message`.
query parse_query(std::string_view message);

/// "A", "AAAA", "TXT", ... or "TYPE<n>".
std::string type_name(uint16_t qtype);

/// How many A records fit in a response of at most `bytes_max` bytes.
size_t answers_that_fit(const query& q, size_t bytes_max);

/// A response to `q`: the question echoed when `q` is a query, A records for
/// `addresses` (host byte order) with `ttl_s`, RD copied, RA set. When the
/// records do not fit in `bytes_max`, none are sent and TC is set (the client
/// asks again over TCP).
std::string build_response(const query& q, rcode code, const std::vector<uint32_t>& addresses,
                           uint32_t ttl_s, size_t bytes_max);

} // namespace airlock::worker::egress::dns
