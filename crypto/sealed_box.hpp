#pragma once
// Authenticated encryption of small secrets at rest (the credentials'
// secrets in the control plane's store): AES-256-GCM with a random 96-bit
// nonce per seal, under a master key kept in a 0600 file of the data
// directory. The associated data binds a sealed value to its record (the
// credential id), so a sealed secret copied into another record fails to open.

#include <cstddef>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::crypto {

inline constexpr size_t sealed_key_bytes = 32;
inline constexpr size_t sealed_nonce_bytes = 12;
inline constexpr size_t sealed_tag_bytes = 16;

/// nonce(12) || ciphertext || tag(16). Errors: invalid_argument (a key that
/// is not 32 bytes), internal (OpenSSL failed). Thread-safe.
result<std::string> seal(std::string_view key, std::string_view plaintext,
                         std::string_view associated_data);

/// The plaintext of what seal() made with the same key and associated data.
/// Errors: invalid_argument (key size), corrupt_record (too short, tampered,
/// another key or other associated data: one answer for all). Thread-safe.
result<std::string> open(std::string_view key, std::string_view sealed,
                         std::string_view associated_data);

/// The 32-byte key in `path`, created (random, mode 0600, synced) when the
/// file does not exist. Refuses a file readable or writable by group or
/// others (permission_denied) or of another size (corrupt_record); io_error
/// when it cannot be read or written. Blocking: call from set-up code.
result<std::string> load_or_create_key_file(const std::string& path);

} // namespace airlock::crypto
