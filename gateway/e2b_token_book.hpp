#pragma once
// The envd access tokens that the E2B front handed out, kept so that a signed
// file URL can be traced back to its sandbox.
//
// The SDK's uploadUrl()/downloadUrl() build `<origin>/files?path=&username=
// &signature=[&signature_expiration=]` where signature = "v1_" + base64(
// sha256("<path>:<read|write>:<user>:<token>[:<expiry>]")) without padding.
// Such a URL names no sandbox and carries no token, so the server finds the
// token whose signature matches among the ones it issued. Tokens live in
// memory: a URL signed before the control plane restarted is refused (401),
// and the SDK signs a new one with the token that Sandbox.connect returns.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::gateway {

/// What a signed URL says, as its query carries it.
struct signed_file_request {
  std::string path;       ///< exactly as signed (not resolved)
  std::string operation;  ///< "read" (download) or "write" (upload)
  std::string username;   ///< empty when none was given
  std::string signature;  ///< "v1_..."
  std::string expiration; ///< Unix seconds as text; empty when none
};

/// envd's signature of a file URL for `token`.
std::string envd_file_signature(const signed_file_request& request, std::string_view token);

/// Thread-safe; bounded: at most `entries_max` tokens, the oldest and the
/// expired forgotten first.
class envd_token_book {
public:
  explicit envd_token_book(size_t entries_max = 100000) : entries_max_(entries_max) {}

  void remember(std::string sandbox_id, std::string token, int64_t expires_at_ms);

  struct match {
    std::string sandbox_id;
    std::string token;
  };
  /// The issued, unexpired token that signed `request`, if any.
  std::optional<match> find(const signed_file_request& request, int64_t now_ms) const;

  size_t size() const;

private:
  struct entry {
    std::string sandbox_id;
    std::string token;
    int64_t expires_at_ms = 0;
  };
  size_t entries_max_;
  mutable std::mutex mutex_;
  std::deque<entry> entries_; ///< oldest first
};

} // namespace airlock::gateway
