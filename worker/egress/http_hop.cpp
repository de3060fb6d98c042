#include "worker/egress/http_hop.hpp"

#include <strings.h>

#include <array>
#include <vector>

#include <openssl/evp.h>

#include "schema/base64.hpp"

namespace airlock::worker::egress {
namespace {

std::string_view sv(boost::beast::string_view text) { return {text.data(), text.size()}; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

/// The comma-separated tokens of every `name` field, lowercase, parameters
/// (";q=...") dropped, empty elements skipped.
template <bool is_request>
std::vector<std::string> tokens_of(const http::header<is_request>& message, http::field name) {
  std::vector<std::string> tokens;
  auto [begin, end] = message.equal_range(name);
  for (auto it = begin; it != end; ++it) {
    std::string_view rest = sv(it->value());
    while (!rest.empty()) {
      auto comma = rest.find(',');
      auto element = rest.substr(0, comma);
      element = trim(element.substr(0, element.find(';')));
      if (!element.empty()) {
        std::string token{element};
        for (auto& c : token)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        tokens.push_back(std::move(token));
      }
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return tokens;
}

bool contains(const std::vector<std::string>& tokens, std::string_view token) {
  for (const auto& t : tokens)
    if (t == token)
      return true;
  return false;
}

/// Fields a request's framing or routing rests on: removing one because
/// Connection names it would let the upstream read the rest of the stream
/// as requests the proxy never judged.
bool is_framing_or_routing(std::string_view name) {
  return iequals(name, "host") || iequals(name, "content-length")
         || iequals(name, "transfer-encoding");
}

/// Fields by which a client claims, to a reverse proxy upstream, a host or
/// path other than the request's own: a sandbox is not a proxy.
constexpr std::array<std::string_view, 7> claimed_routing_fields = {
  "Forwarded", "X-Forwarded-Host", "X-Forwarded-Server", "X-Original-Host",
  "X-Host",    "X-Original-URL",   "X-Rewrite-URL"};

bool is_websocket_upgrade(const http::request_header<>& req,
                          const std::vector<std::string>& connection) {
  return req.method() == http::verb::get && contains(connection, "upgrade")
         && req.count(http::field::upgrade) == 1
         && iequals(trim(sv(req[http::field::upgrade])), "websocket")
         && req.count(http::field::sec_websocket_key) == 1
         && !trim(sv(req[http::field::sec_websocket_key])).empty()
         && req.count(http::field::sec_websocket_version) == 1;
}

} // namespace

std::optional<std::string> prepare_upstream_request(http::request_header<>& req,
                                                    const std::string& host_field,
                                                    protocol_switch& asked) {
  asked = {};
  const auto connection = tokens_of(req, http::field::connection);
  const bool keep_alive =
    req.version() >= 11 ? !contains(connection, "close") : contains(connection, "keep-alive");
  for (const auto& name : connection)
    if (is_framing_or_routing(name))
      return "Connection names " + name + ", which the request's framing or routing rests on";

  asked.websocket = is_websocket_upgrade(req, connection);
  if (asked.websocket) {
    asked.websocket_key = std::string{trim(sv(req[http::field::sec_websocket_key]))};
  } else if (req.count(http::field::upgrade) > 0) {
    for (const auto& token : tokens_of(req, http::field::upgrade)) {
      if (!asked.refused.empty())
        asked.refused += ", ";
      asked.refused += token;
    }
    if (asked.refused.empty())
      asked.refused = "(empty)";
  }

  for (const auto& name : connection)
    if (!(asked.websocket && name == "upgrade"))
      req.erase(name);
  req.erase(http::field::connection);
  req.erase(http::field::keep_alive);
  req.erase("Proxy-Connection");
  req.erase(http::field::proxy_authorization);
  req.erase("HTTP2-Settings");
  if (!asked.websocket)
    req.erase(http::field::upgrade);
  for (auto name : claimed_routing_fields)
    req.erase(boost::beast::string_view{name.data(), name.size()});

  const bool te_trailers = contains(tokens_of(req, http::field::te), "trailers");
  req.erase(http::field::te);
  if (te_trailers)
    req.set(http::field::te, "trailers");

  req.set(http::field::host, host_field);

  std::string hop;
  auto add = [&hop](std::string_view token) {
    if (!hop.empty())
      hop += ", ";
    hop += token;
  };
  if (asked.websocket)
    add("Upgrade");
  if (te_trailers)
    add("TE");
  if (!asked.websocket && !keep_alive)
    add("close");
  if (!asked.websocket && keep_alive && req.version() == 10)
    add("keep-alive");
  if (!hop.empty())
    req.set(http::field::connection, hop);
  return std::nullopt;
}

std::string websocket_accept(std::string_view key) {
  static constexpr std::string_view guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  std::string text{key};
  text += guid;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr);
  return base64_encode(std::string_view{reinterpret_cast<const char*>(digest), size});
}

bool answers_websocket(const http::response_header<>& res, const protocol_switch& asked) {
  if (!asked.websocket || res.result_int() != 101)
    return false;
  return res.count(http::field::upgrade) == 1
         && iequals(trim(sv(res[http::field::upgrade])), "websocket")
         && contains(tokens_of(res, http::field::connection), "upgrade")
         && res.count(http::field::sec_websocket_accept) == 1
         && trim(sv(res[http::field::sec_websocket_accept]))
              == websocket_accept(asked.websocket_key);
}

std::string switched_protocol(const http::response_header<>& res) {
  constexpr std::size_t protocol_max = 64;
  std::string_view upgrade = trim(sv(res[http::field::upgrade]));
  if (upgrade.empty())
    return "none";
  return std::string{upgrade.substr(0, protocol_max)};
}

} // namespace airlock::worker::egress
