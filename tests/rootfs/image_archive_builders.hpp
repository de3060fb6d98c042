#pragma once
// Archives built in memory for the image importer's tests (tar, OCI image
// layouts, docker save), and the fixture that imports them into a fresh root.

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <locale.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/rootfs/test_support.hpp"
#include "tests/support/environment.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/image_import.hpp"

namespace airlock::worker::image_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr mode_t hardlink_type = 0; // tar_entry::type of a hard link
constexpr int64_t archive_mtime = 1'600'000'000;

#if defined(__x86_64__)
constexpr const char* host_arch = "amd64";
#elif defined(__aarch64__)
constexpr const char* host_arch = "arm64";
#else
constexpr const char* host_arch = "unknown";
#endif

// ---- building archives

struct tar_entry {
  std::string path;
  mode_t type = AE_IFREG;
  std::string data; ///< a file's contents; a link's target
  mode_t mode = 0644;
  int64_t uid = 0;
  int64_t gid = 0;
  unsigned rdev_major = 0;
  unsigned rdev_minor = 0;
};

inline tar_entry file(std::string path, std::string data, mode_t mode = 0644) {
  return {std::move(path), AE_IFREG, std::move(data), mode};
}
inline tar_entry dir(std::string path, mode_t mode = 0755) {
  return {std::move(path), AE_IFDIR, {}, mode};
}
inline tar_entry symlink(std::string path, std::string target) {
  return {std::move(path), AE_IFLNK, std::move(target), 0777};
}
inline tar_entry hardlink(std::string path, std::string target) {
  return {std::move(path), hardlink_type, std::move(target), 0644};
}
inline tar_entry fifo(std::string path) { return {std::move(path), AE_IFIFO, {}, 0640}; }
inline tar_entry device(std::string path, mode_t type, unsigned major, unsigned minor) {
  return {std::move(path), type, {}, 0666, 0, 0, major, minor};
}

enum class compression { none, gzip, zstd };

inline la_ssize_t append_to_string(archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

inline void add_entry(archive* a, const tar_entry& item) {
  archive_entry* entry = archive_entry_new();
  archive_entry_copy_pathname(entry, item.path.c_str());
  if (item.type == hardlink_type) {
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_copy_hardlink(entry, item.data.c_str());
  } else {
    archive_entry_set_filetype(entry, item.type);
  }
  archive_entry_set_perm(entry, item.mode);
  archive_entry_set_uid(entry, item.uid);
  archive_entry_set_gid(entry, item.gid);
  archive_entry_set_mtime(entry, archive_mtime, 0);
  if (item.type == AE_IFREG)
    archive_entry_set_size(entry, static_cast<la_int64_t>(item.data.size()));
  if (item.type == AE_IFLNK)
    archive_entry_copy_symlink(entry, item.data.c_str());
  if (item.type == AE_IFCHR || item.type == AE_IFBLK) {
    archive_entry_set_rdevmajor(entry, item.rdev_major);
    archive_entry_set_rdevminor(entry, item.rdev_minor);
  }
  EXPECT_EQ(archive_write_header(a, entry), ARCHIVE_OK) << archive_error_string(a);
  if (item.type == AE_IFREG && !item.data.empty()) {
    EXPECT_EQ(archive_write_data(a, item.data.data(), item.data.size()),
              static_cast<la_ssize_t>(item.data.size()));
  }
  archive_entry_free(entry);
}

inline std::string make_tar(const std::vector<tar_entry>& entries,
                            compression filter = compression::none) {
  // The writer stores names as UTF-8 in pax headers, converting from this
  // thread's locale; the process stays in the "C" locale, as airlockd does.
  locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
  EXPECT_NE(utf8, locale_t{});
  locale_t previous = ::uselocale(utf8);
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  // No padding to a 10 KiB record: a compressed layer then decompresses to
  // exactly the uncompressed tar (its diff_id), and a cut one is truncated.
  archive_write_set_bytes_in_last_block(a, 1);
  if (filter == compression::gzip)
    archive_write_add_filter_gzip(a);
  if (filter == compression::zstd)
    archive_write_add_filter_zstd(a);
  archive_write_open(a, &out, nullptr, append_to_string, nullptr);
  for (const auto& item : entries)
    add_entry(a, item);
  archive_write_close(a);
  archive_write_free(a);
  ::uselocale(previous);
  ::freelocale(utf8);
  return out;
}

inline std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned size = 0;
  EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr);
  std::string out;
  for (unsigned i = 0; i < size; ++i) {
    char pair[3];
    std::snprintf(pair, sizeof pair, "%02x", digest[i]);
    out += pair;
  }
  return out;
}

inline json image_config_json(const std::vector<std::string>& diff_ids) {
  return {{"architecture", host_arch},
          {"os", "linux"},
          {"config",
           {{"Env", {"PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"}},
            {"WorkingDir", "/srv/app"},
            {"User", "1000:1000"},
            {"Entrypoint", {"/bin/sh", "-c"}},
            {"Cmd", {"exec app --serve"}}}},
          {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
}

// Blobs of an OCI image layout, then the layout as a tar.
class oci_layout {
public:
  json add_blob(const std::string& content, const std::string& media_type) {
    auto hex = sha256_hex(content);
    members_.push_back(file("blobs/sha256/" + hex, content));
    return {{"mediaType", media_type},
            {"digest", "sha256:" + hex},
            {"size", static_cast<int64_t>(content.size())}};
  }

  /// A manifest of `layers` (each a tar blob, of which `plain` are the
  /// uncompressed tars) with the test config; returns its descriptor.
  json add_image(const std::vector<std::string>& layers, const std::vector<std::string>& plain) {
    std::vector<std::string> diff_ids;
    for (const auto& tar : plain)
      diff_ids.push_back("sha256:" + sha256_hex(tar));
    json manifest = {{"schemaVersion", 2},
                     {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                     {"config", add_blob(image_config_json(diff_ids).dump(),
                                         "application/vnd.oci.image.config.v1+json")},
                     {"layers", json::array()}};
    for (const auto& layer : layers)
      manifest["layers"].push_back(add_blob(layer, "application/vnd.oci.image.layer.v1.tar+gzip"));
    return add_blob(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  }

  std::string build(const std::vector<json>& manifests) {
    auto members = members_;
    members.push_back(file("oci-layout", R"({"imageLayoutVersion":"1.0.0"})"));
    json index = {{"schemaVersion", 2}, {"manifests", json(manifests)}};
    members.push_back(file("index.json", index.dump()));
    return make_tar(members);
  }

  std::vector<tar_entry> members_;
};

inline json with_platform(json descriptor, const std::string& os, const std::string& arch) {
  descriptor["platform"] = {{"os", os}, {"architecture", arch}};
  return descriptor;
}

// Two layers: the second overwrites a file, whites out a file and a
// directory, makes var/cache opaque (with entries of its own before and after
// the marker) and swaps a file and a directory.
inline std::vector<tar_entry> lower_layer() {
  return {dir("etc/"),
          file("etc/keep", "keep v1"),
          file("etc/remove-me", "gone"),
          dir("var/"),
          dir("var/cache/"),
          file("var/cache/a", "a"),
          dir("var/cache/sub/"),
          file("var/cache/sub/b", "b"),
          dir("var/cache/kept/"),
          file("var/cache/kept/old", "old"),
          dir("gone-dir/"),
          file("gone-dir/x", "x"),
          file("swap", "a file first"),
          dir("flip/"),
          file("flip/x", "x"),
          symlink("etc/link", "/etc/keep")};
}

inline std::vector<tar_entry> upper_layer() {
  return {file("etc/keep", "keep v2"),
          file("var/cache/kept/new", "new"),
          file("var/cache/new-before", "before"),
          file("etc/.wh.remove-me", ""),
          file(".wh.gone-dir", ""),
          file("var/cache/.wh..wh..opq", ""),
          file("var/cache/new-after", "after"),
          dir("swap/"),
          file("swap/inner", "inner"),
          file("flip", "a file now")};
}

inline uint64_t file_bytes(const std::vector<tar_entry>& entries) {
  uint64_t total = 0;
  for (const auto& item : entries)
    if (item.type == AE_IFREG)
      total += item.data.size();
  return total;
}

// ---- the fixture

class image_import : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(scratch_.path().empty());
    root_ = scratch_.path() / "root";
    outside_ = scratch_.path() / "outside";
    ASSERT_TRUE(fs::create_directory(root_));
    ASSERT_TRUE(fs::create_directory(outside_));
    ASSERT_TRUE(write_file(outside_ / "secret", "secret"));
  }

  result<image_config> import(const std::string& bytes, archive_format format,
                              const archive_limits& limits = {},
                              const import_progress_fn& progress = {}) {
    auto archive = scratch_.path() / "upload";
    EXPECT_TRUE(write_file(archive, bytes));
    return import_image(archive, format, root_, limits, progress);
  }

  std::string contents(const fs::path& relative) {
    auto text = read_file(root_ / relative, 64 << 20);
    return text ? *text : "<" + text.error().message + ">";
  }
  bool exists(const fs::path& relative) { return path_exists(root_ / relative); }
  struct stat stat_of(const fs::path& relative) {
    struct stat st {};
    EXPECT_EQ(::lstat((root_ / relative).c_str(), &st), 0) << relative;
    return st;
  }

  /// Nothing but the root, the upload and the untouched outside directory
  /// (the temporary directory gone too).
  void expect_nothing_outside_root() {
    auto names = list_dir(scratch_.path());
    ASSERT_TRUE(names);
    EXPECT_EQ(*names, (std::vector<std::string>{"outside", "root", "upload"}));
    auto outside = list_dir(outside_);
    ASSERT_TRUE(outside);
    EXPECT_EQ(*outside, (std::vector<std::string>{"secret"}));
    EXPECT_EQ(read_file(outside_ / "secret").value(), "secret");
  }

  void expect_refused(const std::vector<tar_entry>& entries, const std::string& words) {
    auto imported = import(make_tar(entries), archive_format::tar);
    ASSERT_FALSE(imported);
    EXPECT_EQ(imported.code(), errc::invalid_argument) << imported.error().message;
    EXPECT_NE(imported.error().message.find(words), std::string::npos) << imported.error().message;
    expect_nothing_outside_root();
  }

  void expect_two_layers_applied(const image_config& config) {
    EXPECT_EQ(contents("etc/keep"), "keep v2");
    EXPECT_FALSE(exists("etc/remove-me"));
    EXPECT_FALSE(exists("etc/.wh.remove-me"));
    EXPECT_FALSE(exists("gone-dir"));
    EXPECT_FALSE(exists(".wh.gone-dir"));
    EXPECT_FALSE(exists("var/cache/a"));
    EXPECT_FALSE(exists("var/cache/sub"));
    EXPECT_FALSE(exists("var/cache/kept/old"));
    EXPECT_FALSE(exists("var/cache/.wh..wh..opq"));
    EXPECT_EQ(contents("var/cache/kept/new"), "new");
    EXPECT_EQ(contents("var/cache/new-before"), "before");
    EXPECT_EQ(contents("var/cache/new-after"), "after");
    EXPECT_TRUE(S_ISDIR(stat_of("swap").st_mode));
    EXPECT_EQ(contents("swap/inner"), "inner");
    EXPECT_EQ(contents("flip"), "a file now");
    EXPECT_EQ(fs::read_symlink(root_ / "etc/link"), "/etc/keep");
    EXPECT_EQ(config.env,
              (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"}));
    EXPECT_EQ(config.working_dir, "/srv/app");
    EXPECT_EQ(config.user, "1000:1000");
    EXPECT_EQ(config.entrypoint, (std::vector<std::string>{"/bin/sh", "-c"}));
    EXPECT_EQ(config.cmd, (std::vector<std::string>{"exec app --serve"}));
    EXPECT_EQ(config.layers, 2u);
    EXPECT_EQ(config.entries, lower_layer().size() + upper_layer().size());
    EXPECT_EQ(config.bytes, file_bytes(lower_layer()) + file_bytes(upper_layer()));
    expect_nothing_outside_root();
  }

  test::scratch_dir scratch_;
  fs::path root_;
  fs::path outside_;
};

// ---- docker save

// A docker save archive (before docker 25): <id>/layer.tar, <hex>.json and
// manifest.json; the second layer is gzip-compressed and named through a
// member symlink, as docker does for layers it has saved already.
struct docker_archive {
  std::vector<tar_entry> members;
  std::string config_hex;

  docker_archive(const std::string& lower, const std::string& upper_gzip,
                 const std::string& upper_plain) {
    auto config =
      image_config_json({"sha256:" + sha256_hex(lower), "sha256:" + sha256_hex(upper_plain)})
        .dump();
    config_hex = sha256_hex(config);
    auto id1 = sha256_hex("layer one");
    auto id2 = sha256_hex("layer two");
    json manifest = json::array({{{"Config", config_hex + ".json"},
                                  {"RepoTags", {"app:latest"}},
                                  {"Layers", {id1 + "/layer.tar", "dedupe/layer.tar"}}}});
    members = {dir(id1 + "/"),
               file(id1 + "/VERSION", "1.0"),
               file(id1 + "/layer.tar", lower),
               dir(id2 + "/"),
               file(id2 + "/layer.tar", upper_gzip),
               dir("dedupe/"),
               symlink("dedupe/layer.tar", "../" + id2 + "/layer.tar"),
               file(config_hex + ".json", config),
               file("repositories", R"({"app":{"latest":")" + id2 + R"("}})"),
               file("manifest.json", manifest.dump())};
  }
};

} // namespace airlock::worker::image_test
