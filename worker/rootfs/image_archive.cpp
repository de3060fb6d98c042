// Reading archives with libarchive, and the text helpers of messages.
#include "worker/rootfs/image_archive.hpp"

namespace airlock::worker::image_detail {

// ---- text

// Entry names come from the archive: bounded and with control bytes escaped,
// so that a message stays one readable line in logs and HTTP errors.
std::string printable(std::string_view text) {
  constexpr size_t shown_max = 200;
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < shown_max; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > shown_max)
    out += "...";
  return out + "'";
}

std::string join_path(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : std::string(dir) + "/" + std::string(name);
}

// ("a/b", "c") for "a/b/c"; ("", "c") for "c".
std::pair<std::string, std::string> split_last(std::string_view path) {
  auto slash = path.rfind('/');
  if (slash == std::string_view::npos)
    return {std::string(), std::string(path)};
  return {std::string(path.substr(0, slash)), std::string(path.substr(slash + 1))};
}

bool is_sha256_hex(std::string_view hex) {
  return hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

status limit_hit(const std::string& what, std::string_view limit, uint64_t value,
                 std::string_view advice) {
  return make_status(errc::resource_exhausted, what + " (archive_limits." + std::string(limit)
                                                 + " = " + std::to_string(value)
                                                 + "): " + std::string(advice));
}

status in_context(std::string_view context, status failure) {
  failure.message = std::string(context) + ": " + failure.message;
  return failure;
}

// Built-in decoders only: archive_read_support_filter_all would also run
// external programs (lrzip, lzop, grzip) on untrusted input.
archive_ptr new_reader(bool raw) {
  archive_ptr a(archive_read_new());
  if (!a)
    throw std::bad_alloc();
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_bzip2(a.get());
  if (raw)
    archive_read_support_format_raw(a.get());
  else
    archive_read_support_format_tar(a.get());
  return a;
}

// Calls `fn` for each entry of the tar in `source`.
status for_each_entry(file_source& source, const entry_fn& fn) {
  auto a = new_reader(false);
  if (auto attached = source.attach(a.get()); !attached)
    return attached;
  for (;;) {
    archive_entry* entry = nullptr;
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF)
      return status::ok();
    // A warning (a malformed pax attribute, a name in another charset) still
    // comes with a usable entry; ARCHIVE_RETRY does not.
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return source.failure(a.get());
    if (auto done = fn(a.get(), entry); !done)
      return source.read_failed() ? source.failure(a.get()) : done;
  }
}

} // namespace airlock::worker::image_detail
