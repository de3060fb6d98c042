#include "worker/egress/dns_message.hpp"

namespace airlock::worker::egress::dns {
namespace {

constexpr uint16_t flag_qr = 0x8000;
constexpr uint16_t flag_tc = 0x0200;
constexpr uint16_t flag_rd = 0x0100;
constexpr uint16_t flag_ra = 0x0080;
constexpr size_t wire_name_max = 255;
constexpr size_t a_record_bytes = 16; // pointer(2) type(2) class(2) ttl(4) length(2) address(4)

uint16_t read16(std::string_view bytes, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(bytes[at]) << 8)
                               | static_cast<uint8_t>(bytes[at + 1]));
}

void put16(std::string& out, uint16_t v) {
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v & 0xff);
}

void put32(std::string& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v >> 16));
  put16(out, static_cast<uint16_t>(v & 0xffff));
}

void append_label_byte(std::string& name, uint8_t c) {
  bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
               || c == '-' || c == '_';
  if (plain) {
    name += static_cast<char>(c);
    return;
  }
  name += '\\';
  name += static_cast<char>('0' + c / 100);
  name += static_cast<char>('0' + c / 10 % 10);
  name += static_cast<char>('0' + c % 10);
}

/// Reads the question name at `at`; the offset past it, or 0 when malformed.
size_t read_name(std::string_view message, size_t at, std::string& name) {
  size_t wire = 0;
  while (true) {
    if (at >= message.size())
      return 0;
    auto length = static_cast<uint8_t>(message[at]);
    ++at;
    ++wire;
    if (length == 0)
      return at;
    if ((length & 0xc0) != 0) // compression pointer or extended label: not in a question
      return 0;
    wire += length;
    if (wire > wire_name_max || at + length > message.size())
      return 0;
    if (!name.empty())
      name += '.';
    for (size_t i = 0; i < length; ++i)
      append_label_byte(name, static_cast<uint8_t>(message[at + i]));
    at += length;
  }
}

} // namespace

query parse_query(std::string_view message) {
  query q;
  if (message.size() < header_bytes)
    return q; // drop: not even an id to answer to
  q.id = read16(message, 0);
  q.flags = read16(message, 2);
  if ((q.flags & flag_qr) != 0)
    return q; // a response: never answer one (no loops)
  if (((q.flags >> 11) & 0xf) != 0) {
    q.outcome = verdict::notimp;
    return q;
  }
  q.outcome = verdict::formerr;
  if (read16(message, 4) != 1)
    return q;
  size_t end = read_name(message, header_bytes, q.name);
  if (end == 0 || end + 4 > message.size()) {
    q.name.clear();
    return q;
  }
  q.qtype = read16(message, end);
  q.qclass = read16(message, end + 2);
  q.question = std::string(message.substr(header_bytes, end + 4 - header_bytes));
  q.outcome = verdict::query;
  return q;
}

std::string type_name(uint16_t qtype) {
  switch (qtype) {
    case 1: return "A";
    case 2: return "NS";
    case 5: return "CNAME";
    case 6: return "SOA";
    case 10: return "NULL";
    case 12: return "PTR";
    case 13: return "HINFO";
    case 15: return "MX";
    case 16: return "TXT";
    case 28: return "AAAA";
    case 33: return "SRV";
    case 35: return "NAPTR";
    case 41: return "OPT";
    case 64: return "SVCB";
    case 65: return "HTTPS";
    case 99: return "SPF";
    case 252: return "AXFR";
    case 255: return "ANY";
    case 257: return "CAA";
    default: return "TYPE" + std::to_string(qtype);
  }
}

size_t answers_that_fit(const query& q, size_t bytes_max) {
  size_t used = header_bytes + q.question.size();
  return used >= bytes_max ? 0 : (bytes_max - used) / a_record_bytes;
}

std::string build_response(const query& q, rcode code, const std::vector<uint32_t>& addresses,
                           uint32_t ttl_s, size_t bytes_max) {
  const bool echo = q.outcome == verdict::query;
  const bool truncated = echo && addresses.size() > answers_that_fit(q, bytes_max);
  const size_t answers = (echo && !truncated) ? addresses.size() : 0;
  uint16_t flags = static_cast<uint16_t>(flag_qr | (q.flags & 0x7800) | (q.flags & flag_rd)
                                         | flag_ra | static_cast<uint16_t>(code));
  if (truncated)
    flags |= flag_tc;
  std::string out;
  out.reserve(header_bytes + q.question.size() + answers * a_record_bytes);
  put16(out, q.id);
  put16(out, flags);
  put16(out, echo ? 1 : 0);
  put16(out, static_cast<uint16_t>(answers));
  put16(out, 0);
  put16(out, 0);
  if (echo)
    out += q.question;
  for (size_t i = 0; i < answers; ++i) {
    put16(out, 0xc000 | header_bytes); // the name: a pointer to the question's
    put16(out, type_a);
    put16(out, class_in);
    put32(out, ttl_s);
    put16(out, 4);
    put32(out, addresses[i]);
  }
  return out;
}

} // namespace airlock::worker::egress::dns
