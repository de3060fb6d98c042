// Unit tests of the image importer: plain tar, OCI layout and docker save
// archives built here with libarchive's writer; whiteouts, escapes, refused
// entries, digests and limits. Runs without root; the ownership case skips.

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

namespace airlock::worker {
namespace {

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

tar_entry file(std::string path, std::string data, mode_t mode = 0644) {
  return {std::move(path), AE_IFREG, std::move(data), mode};
}
tar_entry dir(std::string path, mode_t mode = 0755) {
  return {std::move(path), AE_IFDIR, {}, mode};
}
tar_entry symlink(std::string path, std::string target) {
  return {std::move(path), AE_IFLNK, std::move(target), 0777};
}
tar_entry hardlink(std::string path, std::string target) {
  return {std::move(path), hardlink_type, std::move(target), 0644};
}
tar_entry fifo(std::string path) { return {std::move(path), AE_IFIFO, {}, 0640}; }
tar_entry device(std::string path, mode_t type, unsigned major, unsigned minor) {
  return {std::move(path), type, {}, 0666, 0, 0, major, minor};
}

enum class compression { none, gzip, zstd };

la_ssize_t append_to_string(archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

void add_entry(archive* a, const tar_entry& item) {
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

std::string make_tar(const std::vector<tar_entry>& entries,
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

std::string sha256_hex(std::string_view data) {
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

json image_config_json(const std::vector<std::string>& diff_ids) {
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

json with_platform(json descriptor, const std::string& os, const std::string& arch) {
  descriptor["platform"] = {{"os", os}, {"architecture", arch}};
  return descriptor;
}

// Two layers: the second overwrites a file, whites out a file and a
// directory, makes var/cache opaque (with entries of its own before and after
// the marker) and swaps a file and a directory.
std::vector<tar_entry> lower_layer() {
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

std::vector<tar_entry> upper_layer() {
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

uint64_t file_bytes(const std::vector<tar_entry>& entries) {
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

TEST(archive_format, parses_the_three_names_and_refuses_others) {
  EXPECT_EQ(parse_archive_format("oci").value(), archive_format::oci);
  EXPECT_EQ(parse_archive_format("docker").value(), archive_format::docker);
  EXPECT_EQ(parse_archive_format("tar").value(), archive_format::tar);
  EXPECT_EQ(parse_archive_format("zip").code(), errc::invalid_argument);
  EXPECT_EQ(parse_archive_format("").code(), errc::invalid_argument);
  EXPECT_EQ(to_string(archive_format::docker), "docker");
}

// ---- plain tar

class plain_tar : public image_import, public ::testing::WithParamInterface<compression> {};

TEST_P(plain_tar, unpacks_files_directories_links_and_modes) {
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>((i * 7919) >> 8);
  std::vector<tar_entry> entries = {dir("./", 0750),
                                    dir("./bin/"),
                                    file("./bin/tool", "#!/bin/sh\n", 04755),
                                    file("./bin/group-tool", "x", 02711),
                                    dir("./tmp/", 01777),
                                    dir("./etc/"),
                                    file("./etc/hosts", "127.0.0.1 localhost\n"),
                                    symlink("./etc/alias", "hosts"),
                                    hardlink("./etc/hosts.link", "./etc/hosts"),
                                    fifo("./run/fifo"),
                                    file("./usr/share/doc/deep/file", "deep"),
                                    file("./données/été.txt", "utf-8"),
                                    dir("./ro/", 0555),
                                    file("./ro/inside", "written before ro applies"),
                                    file("./big", big)};
  auto bytes = make_tar(entries, GetParam());
  auto imported = import(bytes, archive_format::tar);
  ASSERT_TRUE(imported) << imported.error().message;
  ::chmod((root_ / "ro").c_str(), 0755); // lets the scratch directory go without root

  EXPECT_EQ(stat_of(".").st_mode & 07777, 0750u);
  EXPECT_EQ(contents("bin/tool"), "#!/bin/sh\n");
  EXPECT_EQ(stat_of("bin/tool").st_mode & 07777, 04755u);
  EXPECT_EQ(stat_of("bin/tool").st_uid, ::geteuid()); // the archive's 0, or ours without root
  EXPECT_EQ(stat_of("bin/group-tool").st_mode & 07777, 02711u);
  EXPECT_EQ(stat_of("tmp").st_mode & 07777, 01777u);
  EXPECT_EQ(fs::read_symlink(root_ / "etc/alias"), "hosts");
  EXPECT_EQ(stat_of("etc/hosts.link").st_ino, stat_of("etc/hosts").st_ino);
  EXPECT_EQ(stat_of("etc/hosts").st_nlink, 2u);
  EXPECT_TRUE(S_ISFIFO(stat_of("run/fifo").st_mode));
  EXPECT_EQ(stat_of("run/fifo").st_mode & 07777, 0640u);
  EXPECT_EQ(contents("usr/share/doc/deep/file"), "deep");
  EXPECT_EQ(contents("données/été.txt"), "utf-8");
  EXPECT_EQ(contents("ro/inside"), "written before ro applies");
  EXPECT_TRUE(contents("big") == big); // not EXPECT_EQ: 3 MiB would be printed
  // Directory times are set after their children are written.
  EXPECT_EQ(stat_of("etc").st_mtime, archive_mtime);
  EXPECT_EQ(stat_of("bin/tool").st_mtime, archive_mtime);
  EXPECT_EQ(stat_of("etc/alias").st_mtime, archive_mtime);

  EXPECT_EQ(imported->digest, "sha256:" + sha256_hex(bytes));
  EXPECT_EQ(imported->layers, 1u);
  EXPECT_EQ(imported->entries, entries.size());
  EXPECT_EQ(imported->bytes, file_bytes(entries));
  EXPECT_TRUE(imported->env.empty());
  EXPECT_TRUE(imported->cmd.empty());
  EXPECT_EQ(list_dir(scratch_.path()).value(),
            (std::vector<std::string>{"outside", "root", "upload"}));
}

INSTANTIATE_TEST_SUITE_P(compressions, plain_tar,
                         ::testing::Values(compression::none, compression::gzip, compression::zstd),
                         [](const ::testing::TestParamInfo<compression>& param) {
                           switch (param.param) {
                             case compression::gzip: return std::string("gzip");
                             case compression::zstd: return std::string("zstd");
                             default: return std::string("plain");
                           }
                         });

TEST_F(image_import, sets_owners_from_the_archive_as_root_keeping_setuid) {
  AIRLOCK_REQUIRE_ROOT("only root can give files other owners");
  auto owned = [](tar_entry entry) {
    entry.uid = 1234;
    entry.gid = 5678;
    return entry;
  };
  auto imported = import(make_tar({owned(dir("home/", 0750)), owned(file("home/su", "x", 06755)),
                                   owned(symlink("home/link", "su")), owned(fifo("home/fifo"))}),
                         archive_format::tar);
  ASSERT_TRUE(imported) << imported.error().message;
  for (const char* path : {"home", "home/su", "home/link", "home/fifo"}) {
    EXPECT_EQ(stat_of(path).st_uid, 1234u) << path;
    EXPECT_EQ(stat_of(path).st_gid, 5678u) << path;
  }
  EXPECT_EQ(stat_of("home/su").st_mode & 07777, 06755u);
  EXPECT_EQ(stat_of("home").st_mode & 07777, 0750u);
}

TEST_F(image_import, refuses_a_root_that_is_not_empty) {
  ASSERT_TRUE(write_file(root_ / "left-over", "x"));
  auto imported = import(make_tar({file("a", "a")}), archive_format::tar);
  EXPECT_EQ(imported.code(), errc::wrong_state);
  EXPECT_FALSE(exists("a"));
}

TEST_F(image_import, refuses_a_hard_link_to_a_path_not_yet_written) {
  expect_refused({hardlink("early", "later"), file("later", "x")}, "not in the root");
  EXPECT_FALSE(exists("early"));
}

// ---- OCI layouts

TEST_F(image_import, applies_oci_layers_in_order_with_whiteouts_and_opaque_directories) {
  oci_layout layout;
  auto lower = make_tar(lower_layer());
  auto upper = make_tar(upper_layer());
  auto manifest = layout.add_image(
    {make_tar(lower_layer(), compression::gzip), make_tar(upper_layer(), compression::zstd)},
    {lower, upper});
  auto imported =
    import(layout.build({with_platform(manifest, "linux", host_arch)}), archive_format::oci);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(imported->digest, manifest["digest"].get<std::string>());
  expect_two_layers_applied(*imported);
}

TEST_F(image_import, whiteouts_spare_what_the_same_layer_writes_in_any_order) {
  oci_layout layout;
  auto manifest = layout.add_image(
    {make_tar({dir("d/"), file("d/old", "old"), dir("d/sub/"), file("d/sub/old", "old")}),
     make_tar({file("d/sub/new", "new"), file("d/.wh..wh..opq", ""), file("d/old", "again"),
               file("d/.wh.old", ""), file("d/.wh..wh.plnk", "")})},
    {});
  auto imported = import(layout.build({manifest}), archive_format::oci);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(contents("d/sub/new"), "new");
  EXPECT_FALSE(exists("d/sub/old"));
  EXPECT_EQ(contents("d/old"), "again"); // a whiteout applies to lower layers only
  EXPECT_FALSE(exists("d/.wh..wh.plnk"));
}

TEST_F(image_import, recreates_a_directory_a_whiteout_deleted_in_the_same_layer) {
  oci_layout layout;
  auto manifest = layout.add_image({make_tar({dir("d/"), file("d/old", "old")}),
                                    make_tar({file(".wh.d", ""), file("d/new", "new")})},
                                   {});
  auto imported = import(layout.build({manifest}), archive_format::oci);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_FALSE(exists("d/old"));
  EXPECT_EQ(contents("d/new"), "new");
}

TEST_F(image_import, picks_the_host_platform_from_a_nested_image_index) {
  oci_layout layout;
  auto other =
    with_platform(layout.add_image({make_tar({file("arch", "s390x")})}, {}), "linux", "s390x");
  auto host =
    with_platform(layout.add_image({make_tar({file("arch", "host")})}, {}), "linux", host_arch);
  auto attestation =
    with_platform(layout.add_image({make_tar({file("arch", "attest")})}, {}), "unknown", "unknown");
  json inner = {{"schemaVersion", 2},
                {"mediaType", "application/vnd.oci.image.index.v1+json"},
                {"manifests", json::array({attestation, other, host})}};
  auto index = layout.add_blob(inner.dump(), "application/vnd.oci.image.index.v1+json");
  auto imported = import(layout.build({index}), archive_format::oci);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(contents("arch"), "host");
  EXPECT_EQ(imported->digest, host["digest"].get<std::string>());
}

TEST_F(image_import, refuses_an_index_without_the_host_platform) {
  oci_layout layout;
  auto other =
    with_platform(layout.add_image({make_tar({file("arch", "s390x")})}, {}), "linux", "s390x");
  auto imported = import(layout.build({other}), archive_format::oci);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::invalid_argument);
  EXPECT_NE(imported.error().message.find("linux/s390x"), std::string::npos)
    << imported.error().message;
}

TEST_F(image_import, refuses_an_oci_blob_that_does_not_match_its_digest) {
  oci_layout layout;
  auto manifest = layout.add_image({make_tar({file("a", "original")}, compression::gzip)}, {});
  // Swap the layer blob's content for another of the same length.
  auto& layer = layout.members_[1];
  ASSERT_NE(layer.path.find("blobs/sha256/"), std::string::npos);
  layer.data = make_tar({file("a", "modified")}, compression::gzip);
  auto imported = import(layout.build({manifest}), archive_format::oci);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::invalid_argument);
  EXPECT_NE(imported.error().message.find("does not match its digest"), std::string::npos)
    << imported.error().message;
  EXPECT_FALSE(exists("a"));
  EXPECT_FALSE(path_exists(scratch_.path() / "root.import"));
}

TEST_F(image_import, refuses_a_tar_that_is_not_an_oci_layout) {
  auto imported = import(make_tar({file("etc/hosts", "x")}), archive_format::oci);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::invalid_argument);
  EXPECT_NE(imported.error().message.find("oci-layout"), std::string::npos);
  EXPECT_FALSE(path_exists(scratch_.path() / "root.import"));
}

TEST_F(image_import, replaces_a_temporary_directory_left_by_a_crash_and_removes_it) {
  ASSERT_TRUE(make_dirs(scratch_.path() / "root.import" / "stale"));
  oci_layout layout;
  auto manifest = layout.add_image({make_tar({file("a", "a")})}, {});
  auto imported = import(layout.build({manifest}), archive_format::oci);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(contents("a"), "a");
  expect_nothing_outside_root();
}

TEST_F(image_import, reports_progress_per_step_ending_at_the_total) {
  oci_layout layout;
  std::string big(9 << 20, 'x'); // more than two progress intervals
  auto manifest = layout.add_image({make_tar({file("a", "a")}), make_tar({file("big", big)})}, {});
  std::vector<import_progress> reports;
  auto imported = import(layout.build({manifest}), archive_format::oci, {},
                         [&](const import_progress& report) { reports.push_back(report); });
  ASSERT_TRUE(imported) << imported.error().message;
  std::vector<std::string> steps;
  for (const auto& report : reports) {
    if (steps.empty() || steps.back() != report.step)
      steps.push_back(report.step);
    EXPECT_LE(report.bytes_done, report.bytes_total) << report.step;
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"unpack", "layer 1/2", "layer 2/2", "finish"}));
  for (const auto& report : reports) {
    const bool layer_step = report.step.rfind("layer ", 0) == 0;
    EXPECT_EQ(report.layers, layer_step ? 2u : 0u) << report.step;
    if (layer_step)
      EXPECT_EQ(report.step, "layer " + std::to_string(report.layer) + "/2");
    else
      EXPECT_EQ(report.layer, 0u) << report.step;
  }
  size_t in_big_layer = 0;
  for (size_t i = 0; i + 1 < reports.size(); ++i) {
    if (reports[i].step == reports[i + 1].step) {
      EXPECT_LE(reports[i].bytes_done, reports[i + 1].bytes_done);
    } else {
      EXPECT_EQ(reports[i].bytes_done, reports[i].bytes_total) << reports[i].step;
    }
    in_big_layer += reports[i].step == "layer 2/2" ? 1 : 0;
  }
  EXPECT_GE(in_big_layer, 4u); // start, two or more in between, end
}

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

TEST_F(image_import, applies_a_docker_save_archive_like_the_oci_layout) {
  auto upper = make_tar(upper_layer());
  docker_archive saved(make_tar(lower_layer()), make_tar(upper_layer(), compression::gzip), upper);
  auto imported = import(make_tar(saved.members), archive_format::docker);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(imported->digest, "sha256:" + saved.config_hex);
  expect_two_layers_applied(*imported);
}

TEST_F(image_import, applies_a_docker_save_archive_with_blob_paths) {
  auto layer = make_tar({file("hello", "world")});
  auto config = image_config_json({"sha256:" + sha256_hex(layer)}).dump();
  json manifest = json::array({{{"Config", "blobs/sha256/" + sha256_hex(config)},
                                {"Layers", {"blobs/sha256/" + sha256_hex(layer)}}}});
  auto imported = import(make_tar({file("blobs/sha256/" + sha256_hex(config), config),
                                   file("blobs/sha256/" + sha256_hex(layer), layer),
                                   file("manifest.json", manifest.dump())}),
                         archive_format::docker);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(contents("hello"), "world");
  EXPECT_EQ(imported->digest, "sha256:" + sha256_hex(config));
}

TEST_F(image_import, refuses_a_docker_layer_that_does_not_match_its_diff_id) {
  auto upper = make_tar(upper_layer());
  docker_archive saved(make_tar(lower_layer()), make_tar({file("etc/keep", "tampered")}), upper);
  auto imported = import(make_tar(saved.members), archive_format::docker);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::invalid_argument);
  EXPECT_NE(imported.error().message.find("diff_id"), std::string::npos)
    << imported.error().message;
  EXPECT_FALSE(exists("etc"));
  EXPECT_FALSE(path_exists(scratch_.path() / "root.import"));
}

TEST_F(image_import, refuses_a_docker_config_that_does_not_match_its_name) {
  auto upper = make_tar(upper_layer());
  docker_archive saved(make_tar(lower_layer()), upper, upper);
  for (auto& member : saved.members)
    if (member.path == saved.config_hex + ".json")
      member.data[member.data.find("/srv/app")] = 'S';
  auto imported = import(make_tar(saved.members), archive_format::docker);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::invalid_argument);
  EXPECT_NE(imported.error().message.find("does not match its digest"), std::string::npos)
    << imported.error().message;
}

// ---- escapes and refused entries

TEST_F(image_import, refuses_a_dot_dot_path) { expect_refused({file("../x", "evil")}, "'..'"); }

TEST_F(image_import, refuses_a_dot_dot_path_that_first_descends) {
  expect_refused({dir("a/"), file("a/../../x", "evil")}, "'..'");
}

TEST_F(image_import, refuses_an_absolute_path) {
  expect_refused({file((outside_ / "absolute").string(), "evil")}, "absolute");
  EXPECT_FALSE(exists("tmp"));
}

TEST_F(image_import, refuses_to_write_through_a_symlink_to_outside) {
  expect_refused({symlink("evil", outside_.string()), file("evil/file", "evil")}, "symlink");
  expect_nothing_outside_root();
}

TEST_F(image_import, refuses_to_write_through_a_relative_symlink_upwards) {
  expect_refused({symlink("up", ".."), file("up/x", "evil")}, "symlink");
}

TEST_F(image_import, refuses_to_write_through_a_symlink_from_a_lower_layer) {
  oci_layout layout;
  auto manifest = layout.add_image(
    {make_tar({symlink("evil", outside_.string())}), make_tar({file("evil/file", "evil")})}, {});
  auto imported = import(layout.build({manifest}), archive_format::oci);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::invalid_argument);
  expect_nothing_outside_root();
}

TEST_F(image_import, refuses_a_hard_link_outside_the_root) {
  expect_refused({hardlink("stolen", "../outside/secret")}, "'..'");
  EXPECT_FALSE(exists("stolen"));
}

TEST_F(image_import, refuses_a_hard_link_through_a_symlink) {
  expect_refused({symlink("evil", outside_.string()), hardlink("stolen", "evil/secret")},
                 "symlink");
  EXPECT_FALSE(exists("stolen"));
}

TEST_F(image_import, refuses_a_whiteout_through_a_symlink) {
  expect_refused({symlink("evil", outside_.string()), file("evil/.wh.secret", "")}, "symlink");
}

TEST_F(image_import, refuses_device_nodes_naming_the_entry) {
  expect_refused({dir("dev/"), device("dev/null", AE_IFCHR, 1, 3)}, "'dev/null' is a character");
  EXPECT_FALSE(exists("dev/null"));
  ASSERT_TRUE(remove_tree(root_) && fs::create_directory(root_));
  expect_refused({device("sda", AE_IFBLK, 8, 0)}, "'sda' is a block device (8:0)");
}

// ---- limits and bad archives

TEST_F(image_import, enforces_the_entry_limit) {
  std::vector<tar_entry> entries = {file("1", ""), file("2", ""), file("3", "")};
  archive_limits limits;
  limits.entries_max = 3;
  ASSERT_TRUE(import(make_tar(entries), archive_format::tar, limits));
  ASSERT_TRUE(remove_tree(root_) && fs::create_directory(root_));
  entries.push_back(file("4", ""));
  auto imported = import(make_tar(entries), archive_format::tar, limits);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::resource_exhausted);
  EXPECT_NE(imported.error().message.find("entries_max = 3"), std::string::npos)
    << imported.error().message;
}

TEST_F(image_import, enforces_the_uncompressed_size_limit) {
  auto bytes = make_tar({file("a", std::string(1000, 'a')), file("b", std::string(1000, 'b'))});
  archive_limits limits;
  limits.uncompressed_bytes_max = 2000;
  ASSERT_TRUE(import(bytes, archive_format::tar, limits));
  ASSERT_TRUE(remove_tree(root_) && fs::create_directory(root_));
  limits.uncompressed_bytes_max = 1999;
  auto imported = import(bytes, archive_format::tar, limits);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::resource_exhausted);
  EXPECT_NE(imported.error().message.find("uncompressed_bytes_max = 1999"), std::string::npos)
    << imported.error().message;
  EXPECT_FALSE(exists("b"));
}

TEST_F(image_import, enforces_the_uncompressed_size_limit_on_the_outer_archive) {
  oci_layout layout;
  auto manifest = layout.add_image({make_tar({file("a", std::string(5000, 'a'))})}, {});
  archive_limits limits;
  limits.uncompressed_bytes_max = 4000;
  auto imported = import(layout.build({manifest}), archive_format::oci, limits);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::resource_exhausted);
  EXPECT_NE(imported.error().message.find("uncompressed_bytes_max"), std::string::npos);
  EXPECT_FALSE(path_exists(scratch_.path() / "root.import"));
}

TEST_F(image_import, enforces_the_path_length_limit) {
  archive_limits limits;
  limits.path_bytes_max = 16;
  ASSERT_TRUE(import(make_tar({file("sixteen-bytes/ab", "")}), archive_format::tar, limits));
  ASSERT_TRUE(remove_tree(root_) && fs::create_directory(root_));
  auto imported = import(make_tar({file("seventeen-bytes/a", "")}), archive_format::tar, limits);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::resource_exhausted);
  EXPECT_NE(imported.error().message.find("path_bytes_max = 16"), std::string::npos)
    << imported.error().message;
  ASSERT_TRUE(remove_tree(root_) && fs::create_directory(root_));
  auto link = import(make_tar({symlink("l", std::string(17, 'x'))}), archive_format::tar, limits);
  EXPECT_EQ(link.code(), errc::resource_exhausted);
}

TEST_F(image_import, enforces_the_compressed_size_limit) {
  auto bytes = make_tar({file("a", std::string(4096, 'a'))}, compression::gzip);
  archive_limits limits;
  limits.compressed_bytes_max = bytes.size();
  ASSERT_TRUE(import(bytes, archive_format::tar, limits));
  ASSERT_TRUE(remove_tree(root_) && fs::create_directory(root_));
  limits.compressed_bytes_max = bytes.size() - 1;
  for (auto format : {archive_format::tar, archive_format::oci, archive_format::docker}) {
    auto imported = import(bytes, format, limits);
    ASSERT_FALSE(imported);
    EXPECT_EQ(imported.code(), errc::resource_exhausted) << to_string(format);
    EXPECT_NE(imported.error().message.find("compressed_bytes_max"), std::string::npos);
    EXPECT_FALSE(exists("a"));
  }
}

TEST_F(image_import, enforces_the_metadata_size_limit) {
  oci_layout layout;
  auto manifest = layout.add_image({make_tar({file("a", "a")})}, {});
  archive_limits limits;
  limits.metadata_bytes_max = 64;
  auto imported = import(layout.build({manifest}), archive_format::oci, limits);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::resource_exhausted);
  EXPECT_NE(imported.error().message.find("metadata_bytes_max = 64"), std::string::npos)
    << imported.error().message;
}

TEST_F(image_import, refuses_a_file_that_is_not_an_archive) {
  std::string garbage;
  for (int i = 0; i < 200; ++i)
    garbage += "this is not a tar archive " + std::to_string(i) + "\n";
  for (auto format : {archive_format::tar, archive_format::oci, archive_format::docker}) {
    auto imported = import(garbage, format);
    ASSERT_FALSE(imported) << to_string(format);
    EXPECT_EQ(imported.code(), errc::invalid_argument) << to_string(format);
    EXPECT_NE(imported.error().message.find("not a tar archive"), std::string::npos)
      << imported.error().message;
  }
  EXPECT_EQ(import("", archive_format::tar).code(), errc::invalid_argument);
  expect_nothing_outside_root();
}

TEST_F(image_import, refuses_a_truncated_archive) {
  auto bytes = make_tar({file("a", std::string(100'000, 'a')), file("b", "b")}, compression::gzip);
  bytes.resize(bytes.size() / 2);
  auto imported = import(bytes, archive_format::tar);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.code(), errc::invalid_argument) << imported.error().message;
  EXPECT_FALSE(exists("b"));
}

TEST_F(image_import, refuses_malformed_image_metadata) {
  auto bytes = make_tar({file("oci-layout", "{}"), file("index.json", R"({"manifests": 7})")});
  auto imported = import(bytes, archive_format::oci);
  EXPECT_EQ(imported.code(), errc::invalid_argument);
  ASSERT_TRUE(remove_tree(root_) && fs::create_directory(root_));
  auto broken = import(make_tar({file("manifest.json", "[{")}), archive_format::docker);
  EXPECT_EQ(broken.code(), errc::invalid_argument);
  EXPECT_NE(broken.error().message.find("not valid JSON"), std::string::npos);
}

} // namespace
} // namespace airlock::worker
