#include "gateway/e2b_token_book.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "schema/base64.hpp"

namespace airlock::gateway {

std::string envd_file_signature(const signed_file_request& request, std::string_view token) {
  std::string text = request.path + ":" + request.operation + ":" + request.username + ":";
  text.append(token);
  if (!request.expiration.empty())
    text += ":" + request.expiration;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    return {};
  auto encoded =
    airlock::base64_encode(std::string_view(reinterpret_cast<const char*>(digest), length));
  while (!encoded.empty() && encoded.back() == '=')
    encoded.pop_back();
  return "v1_" + encoded;
}

void envd_token_book::remember(std::string sandbox_id, std::string token, int64_t expires_at_ms) {
  std::lock_guard lock(mutex_);
  while (entries_.size() >= entries_max_ && !entries_.empty())
    entries_.pop_front();
  entries_.push_back({std::move(sandbox_id), std::move(token), expires_at_ms});
}

std::optional<envd_token_book::match> envd_token_book::find(const signed_file_request& request,
                                                            int64_t now_ms) const {
  std::lock_guard lock(mutex_);
  // Newest first: a sandbox's latest token is the likeliest signer.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->expires_at_ms <= now_ms)
      continue;
    auto expected = envd_file_signature(request, it->token);
    if (expected.size() == request.signature.size()
        && CRYPTO_memcmp(expected.data(), request.signature.data(), expected.size()) == 0)
      return match{it->sandbox_id, it->token};
  }
  return std::nullopt;
}

size_t envd_token_book::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

} // namespace airlock::gateway
