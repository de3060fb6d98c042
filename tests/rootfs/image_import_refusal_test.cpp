// Unit tests of the image importer's refusals: paths that escape the root,
// device nodes, limits, archives that are not archives, malformed metadata.

#include "tests/rootfs/image_archive_builders.hpp"

namespace airlock::worker::image_test {
namespace {

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
} // namespace airlock::worker::image_test
