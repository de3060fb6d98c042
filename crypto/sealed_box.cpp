#include "crypto/sealed_box.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include "schema/atomic_file.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::crypto {

namespace {

using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const unsigned char* bytes(std::string_view text) {
  return reinterpret_cast<const unsigned char*>(text.data());
}

unsigned char* bytes(std::string& text, size_t at = 0) {
  return reinterpret_cast<unsigned char*>(text.data() + at);
}

int length(std::string_view text) { return static_cast<int>(text.size()); }

status check_key(std::string_view key) {
  if (key.size() != sealed_key_bytes)
    return make_status(errc::invalid_argument,
                       "a sealing key must be 32 bytes, not " + std::to_string(key.size()));
  return status::ok();
}

status io_failure(std::string what, const std::string& path) {
  return make_status(errc::io_error, what + " " + path + ": " + std::strerror(errno));
}

/// Reads the whole key file, refusing loose permissions or a wrong size.
result<std::string> read_key(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd)
    return io_failure("cannot open the key file", path);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0)
    return io_failure("cannot stat the key file", path);
  if ((info.st_mode & 077) != 0)
    return make_status(errc::permission_denied, "the key file " + path
                                                  + " is readable or writable by others; "
                                                    "chmod 600 it (and check who read it)");
  if (info.st_size != static_cast<off_t>(sealed_key_bytes))
    return make_status(errc::corrupt_record, "the key file " + path + " holds "
                                               + std::to_string(info.st_size)
                                               + " bytes, not 32; restore it from a backup");
  std::string key(sealed_key_bytes, '\0');
  if (::read(fd.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()))
    return io_failure("cannot read the key file", path);
  return key;
}

/// Writes a fresh key beside `path` and links it into place, so a crash never
/// leaves a short key behind and a concurrent creator wins once.
status create_key(const std::string& path) {
  std::string key(sealed_key_bytes, '\0');
  if (RAND_bytes(bytes(key), length(key)) != 1)
    return make_status(errc::internal, "the system random source failed");
  auto created = write_file_atomically(path, key, 0600, existing_file::keep);
  OPENSSL_cleanse(key.data(), key.size());
  if (!created && created.code != errc::already_exists)
    return created;
  return status::ok();
}

} // namespace

result<std::string> seal(std::string_view key, std::string_view plaintext,
                         std::string_view associated_data) {
  if (auto checked = check_key(key); !checked)
    return checked;
  std::string out(sealed_nonce_bytes + plaintext.size() + sealed_tag_bytes, '\0');
  if (RAND_bytes(bytes(out), static_cast<int>(sealed_nonce_bytes)) != 1)
    return make_status(errc::internal, "the system random source failed");
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int written = 0;
  int final_bytes = 0;
  bool ok =
    ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, bytes(key), bytes(out)) == 1
    && EVP_EncryptUpdate(ctx.get(), nullptr, &written, bytes(associated_data),
                         length(associated_data))
         == 1
    && EVP_EncryptUpdate(ctx.get(), bytes(out, sealed_nonce_bytes), &written, bytes(plaintext),
                         length(plaintext))
         == 1
    && EVP_EncryptFinal_ex(ctx.get(), bytes(out, sealed_nonce_bytes + written), &final_bytes) == 1
    && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, sealed_tag_bytes,
                           bytes(out, out.size() - sealed_tag_bytes))
         == 1;
  if (!ok)
    return make_status(errc::internal, "AES-256-GCM sealing failed");
  return out;
}

result<std::string> open(std::string_view key, std::string_view sealed,
                         std::string_view associated_data) {
  if (auto checked = check_key(key); !checked)
    return checked;
  if (sealed.size() < sealed_nonce_bytes + sealed_tag_bytes)
    return make_status(errc::corrupt_record, "a sealed value is shorter than its nonce and tag");
  auto body =
    sealed.substr(sealed_nonce_bytes, sealed.size() - sealed_nonce_bytes - sealed_tag_bytes);
  std::string tag(sealed.substr(sealed.size() - sealed_tag_bytes));
  std::string out(body.size(), '\0');
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int written = 0;
  int final_bytes = 0;
  bool ok =
    ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, bytes(key), bytes(sealed)) == 1
    && EVP_DecryptUpdate(ctx.get(), nullptr, &written, bytes(associated_data),
                         length(associated_data))
         == 1
    && EVP_DecryptUpdate(ctx.get(), bytes(out), &written, bytes(body), length(body)) == 1
    && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, sealed_tag_bytes, bytes(tag)) == 1
    && EVP_DecryptFinal_ex(ctx.get(), bytes(out, written), &final_bytes) == 1;
  if (!ok) {
    OPENSSL_cleanse(out.data(), out.size());
    return make_status(errc::corrupt_record,
                       "a sealed value does not open: tampered, or sealed under another key "
                       "or for another record");
  }
  return out;
}

result<std::string> load_or_create_key_file(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno != ENOENT)
      return io_failure("cannot stat the key file", path);
    if (auto created = create_key(path); !created)
      return created;
  }
  return read_key(path);
}

} // namespace airlock::crypto
