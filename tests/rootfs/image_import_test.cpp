// Unit tests of the image importer: plain tar, OCI layout and docker save
// archives built here with libarchive's writer: contents, modes, owners,
// whiteouts, platforms, digests and progress. Runs without root; the
// ownership case skips.

#include "tests/rootfs/image_archive_builders.hpp"

namespace airlock::worker::image_test {
namespace {

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

} // namespace
} // namespace airlock::worker::image_test
