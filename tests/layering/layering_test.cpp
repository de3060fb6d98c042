// The layering check: the real tree keeps the declared order (cmake/layers.txt),
// and planted trees with one bad edge each are reported with file, line, the
// edge and the rules file.

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/layering/layering.hpp"

namespace airlock::layering {
namespace {

namespace fs = std::filesystem;

std::string all_messages(const report& r) {
  std::string out;
  for (const auto& v : r.violations)
    out += v.message + "\n";
  return out;
}

/// A tiny source tree in a temporary directory: schema <- storage <- gateway,
/// and tests/ as a non-library, every edge within the rules. Each test
/// plants one bad edge into it.
class planted_tree : public ::testing::Test {
protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path()
            / ("airlock_layering_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    write("cmake/layers.txt", "# tiny rules\n"
                              "schema:\n"
                              "storage: schema\n"
                              "gateway: storage\n");
    write("schema/CMakeLists.txt", "airlock_library(schema SOURCES errc.cpp)\n");
    write("schema/errc.hpp", "#pragma once\n");
    write("schema/errc.cpp", "#include \"schema/errc.hpp\"\n");
    write("storage/CMakeLists.txt", "# storage\n"
                                    "airlock_library(storage SOURCES store.cpp\n"
                                    "  DEPS airlock_schema)\n");
    write("storage/store.hpp", "#pragma once\n"
                               "#include \"schema/errc.hpp\"\n");
    write("storage/store.cpp", "#include \"storage/store.hpp\"\n"
                               "\n"
                               "int store() { return 0; }\n");
    write("gateway/CMakeLists.txt",
          "airlock_library(gateway SOURCES routes.cpp DEPS airlock_storage)\n"
          "add_executable(gatewayd main.cpp)\n"
          "target_link_libraries(gatewayd PRIVATE airlock_gateway)\n");
    write("gateway/routes.cpp", "#include \"storage/store.hpp\"\n"
                                "#include \"schema/errc.hpp\"\n");
    write("tests/CMakeLists.txt", "add_library(test_support STATIC support.cpp)\n");
    write("tests/support.hpp", "#pragma once\n");
  }

  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& relative, const std::string& text) {
    fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  report run() const { return check(root_, "cmake/layers.txt"); }

  fs::path root_;
};

TEST(layering, the_real_tree_keeps_the_declared_order) {
  report r = check(AIRLOCK_SOURCE_DIR, "cmake/layers.txt");
  EXPECT_TRUE(r.violations.empty()) << all_messages(r);
  // Not vacuous: it read the tree.
  EXPECT_GT(r.files_scanned, 100u);
  EXPECT_GT(r.includes_checked, 100u);
  EXPECT_GT(r.links_checked, 10u);
}

TEST(layering, the_real_rules_are_the_architecture_order) {
  std::ifstream in(fs::path(AIRLOCK_SOURCE_DIR) / "cmake/layers.txt");
  std::ostringstream text;
  text << in.rdbuf();
  rules r = parse_rules(text.str(), "cmake/layers.txt");
  EXPECT_TRUE(r.errors.empty());
  // schema -> storage -> actors -> scheduler / worker / gateway -> airlockd.
  const std::set<std::string> nothing;
  EXPECT_EQ(r.allowed["schema"], nothing);
  EXPECT_EQ(r.allowed["metrics"], nothing);
  EXPECT_EQ(r.allowed["storage"], (std::set<std::string>{"schema"}));
  EXPECT_EQ(r.allowed["crypto"], (std::set<std::string>{"schema"}));
  EXPECT_EQ(r.allowed["guest"], (std::set<std::string>{"schema"}));
  EXPECT_EQ(r.allowed["cli"], (std::set<std::string>{"schema"}));
  EXPECT_TRUE(r.allows("actors", "storage"));
  for (const char* upper : {"scheduler", "worker", "gateway"}) {
    EXPECT_TRUE(r.allows(upper, "actors")) << upper;
    EXPECT_FALSE(r.allows("actors", upper)) << upper;
    EXPECT_TRUE(r.allows("airlockd", upper)) << upper;
  }
  EXPECT_FALSE(r.allows("scheduler", "worker"));
  EXPECT_FALSE(r.allows("gateway", "worker"));
  EXPECT_FALSE(r.allows("worker", "gateway"));
  EXPECT_FALSE(r.allows("worker/runtime", "worker"));
  for (const auto& library : r.libraries)
    EXPECT_FALSE(r.allows(library, "airlockd")) << library;
}

TEST_F(planted_tree, is_clean_as_planted) {
  report r = run();
  EXPECT_TRUE(r.violations.empty()) << all_messages(r);
  EXPECT_EQ(r.includes_checked, 3u);
  EXPECT_EQ(r.links_checked, 2u);
}

TEST_F(planted_tree, reports_a_lower_library_including_a_higher_one_with_file_and_line) {
  write("storage/store.cpp", "#include \"storage/store.hpp\"\n"
                             "\n"
                             "#include \"gateway/routes.hpp\"\n");
  report r = run();
  ASSERT_EQ(r.violations.size(), 1u) << all_messages(r);
  const violation& v = r.violations[0];
  EXPECT_EQ(v.file, "storage/store.cpp");
  EXPECT_EQ(v.line, 3u);
  EXPECT_EQ(v.from, "storage");
  EXPECT_EQ(v.to, "gateway");
  EXPECT_NE(v.message.find("storage/store.cpp:3: storage -> gateway:"), std::string::npos)
    << v.message;
  EXPECT_NE(v.message.find("#include \"gateway/routes.hpp\""), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("cmake/layers.txt:3 allows `storage: schema`"), std::string::npos)
    << v.message;
}

TEST_F(planted_tree, reports_a_lower_library_linking_a_higher_one_with_file_and_line) {
  write("storage/CMakeLists.txt", "# storage\n"
                                  "airlock_library(storage SOURCES store.cpp\n"
                                  "  DEPS airlock_schema airlock_gateway)\n");
  report r = run();
  ASSERT_EQ(r.violations.size(), 1u) << all_messages(r);
  const violation& v = r.violations[0];
  EXPECT_EQ(v.file, "storage/CMakeLists.txt");
  EXPECT_EQ(v.line, 3u);
  EXPECT_EQ(v.from, "storage");
  EXPECT_EQ(v.to, "gateway");
  EXPECT_NE(v.message.find("storage/CMakeLists.txt:3: storage -> gateway: links airlock_gateway"),
            std::string::npos)
    << v.message;
  EXPECT_NE(v.message.find("cmake/layers.txt"), std::string::npos) << v.message;
}

TEST_F(planted_tree, reports_a_target_link_libraries_edge_too) {
  write("schema/CMakeLists.txt", "airlock_library(schema SOURCES errc.cpp)\n"
                                 "target_link_libraries(airlock_schema\n"
                                 "  PUBLIC $<TARGET_FILE:airlock_storage>)\n");
  report r = run();
  ASSERT_EQ(r.violations.size(), 1u) << all_messages(r);
  EXPECT_EQ(r.violations[0].file, "schema/CMakeLists.txt");
  EXPECT_EQ(r.violations[0].line, 3u);
  EXPECT_EQ(r.violations[0].from, "schema");
  EXPECT_EQ(r.violations[0].to, "storage");
}

TEST_F(planted_tree, reports_an_allowed_include_of_a_library_that_is_not_linked) {
  write("gateway/CMakeLists.txt",
        "airlock_library(gateway SOURCES routes.cpp DEPS airlock_schema)\n");
  report r = run();
  ASSERT_EQ(r.violations.size(), 1u) << all_messages(r);
  const violation& v = r.violations[0];
  EXPECT_EQ(v.file, "gateway/routes.cpp");
  EXPECT_EQ(v.line, 1u);
  EXPECT_EQ(v.from, "gateway");
  EXPECT_EQ(v.to, "storage");
  EXPECT_NE(v.message.find("does not link airlock_storage"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("cmake/layers.txt"), std::string::npos) << v.message;
}

TEST_F(planted_tree, reports_a_library_that_includes_or_links_tests) {
  write("storage/store.cpp", "#include \"tests/support.hpp\"\n");
  write("storage/CMakeLists.txt", "airlock_library(storage SOURCES store.cpp\n"
                                  "  DEPS airlock_schema test_support)\n");
  report r = run();
  ASSERT_EQ(r.violations.size(), 2u) << all_messages(r);
  EXPECT_EQ(r.violations[0].file, "storage/CMakeLists.txt");
  EXPECT_EQ(r.violations[0].line, 2u);
  EXPECT_EQ(r.violations[0].to, "tests");
  EXPECT_EQ(r.violations[1].file, "storage/store.cpp");
  EXPECT_EQ(r.violations[1].line, 1u);
  EXPECT_EQ(r.violations[1].to, "tests");
}

TEST_F(planted_tree, reports_a_library_the_rules_do_not_name) {
  write("metrics/CMakeLists.txt", "airlock_library(metrics SOURCES metrics.cpp)\n");
  write("storage/CMakeLists.txt", "airlock_library(storage SOURCES store.cpp\n"
                                  "  DEPS airlock_schema airlock_metrics)\n");
  report r = run();
  ASSERT_EQ(r.violations.size(), 2u) << all_messages(r);
  EXPECT_EQ(r.violations[0].file, "metrics/CMakeLists.txt");
  EXPECT_NE(r.violations[0].message.find("airlock_metrics"), std::string::npos);
  EXPECT_EQ(r.violations[1].file, "storage/CMakeLists.txt");
  EXPECT_EQ(r.violations[1].line, 2u);
}

TEST_F(planted_tree, reports_a_library_that_exposes_the_repository_root) {
  write("storage/CMakeLists.txt", "airlock_library(storage SOURCES store.cpp DEPS airlock_schema)\n"
                                  "target_include_directories(airlock_storage PRIVATE x\n"
                                  "  PUBLIC ${PROJECT_SOURCE_DIR})\n");
  report r = run();
  ASSERT_EQ(r.violations.size(), 1u) << all_messages(r);
  EXPECT_EQ(r.violations[0].file, "storage/CMakeLists.txt");
  EXPECT_EQ(r.violations[0].line, 3u);
  EXPECT_NE(r.violations[0].message.find("${PROJECT_SOURCE_DIR} is a PUBLIC include directory"),
            std::string::npos)
    << r.violations[0].message;
}

TEST_F(planted_tree, reports_a_cycle_and_an_unknown_name_in_the_rules) {
  write("cmake/layers.txt", "schema: gateway\n"
                            "storage: schema nosuch\n"
                            "gateway: storage\n");
  report r = run();
  std::string text = all_messages(r);
  EXPECT_NE(text.find("cmake/layers.txt:2: storage -> nosuch: nosuch has no line"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("cycle"), std::string::npos) << text;
}

} // namespace
} // namespace airlock::layering
