// Files through the data plane of `airlockd serve`: round trips (small and
// 100 MiB), modes, list, stat, mkdir, move, delete, errors, and paths that try to
// leave the sandbox (through `..` and links: runtime_parity_test.cpp, for
// every runtime).

#include <filesystem>
#include <map>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_files : public sandbox_suite<api_files> {
public:
  static nlohmann::json sandbox_shape() { return {{"cpu_millis", 500}, {"memory_mb", 512}}; }

protected:
  static std::string files(const std::string& query) {
    return "/v1/sandboxes/" + sandbox_ + "/files" + query;
  }
};

/// `size` bytes from a xorshift generator: every byte value, no pattern that
/// an off-by-one chunk could reproduce.
std::string pseudo_random_bytes(size_t size) {
  std::string out(size, '\0');
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<char>(x & 0xFF);
  }
  return out;
}

TEST_F(api_files, put_then_get_round_trips_bytes_with_the_mode_and_parents_created) {
  auto api = admin();
  std::string content("line one\n\0binary\xff tail", 21);
  auto put = api.call("PUT", files("?path=/work/deep/a.txt&mode=0640"), content);
  ASSERT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(put.json["path"], "/work/deep/a.txt");
  EXPECT_EQ(put.json["size_bytes"], content.size());
  auto got = api.get(files("?path=/work/deep/a.txt"));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body, content);

  auto stat = api.get(files("/stat?path=/work/deep/a.txt"));
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(stat.json["type"], "file");
  EXPECT_EQ(stat.json["size_bytes"], content.size());
  EXPECT_EQ(stat.json["mode"].get<int>() & 07777, 0640);
  // The process inside sees the same bytes and mode.
  auto seen = api.run(sandbox_, "stat -c %a /work/deep/a.txt; head -c 8 /work/deep/a.txt");
  EXPECT_EQ(seen.stdout_bytes, "640\nline one");

  auto empty = api.call("PUT", files("?path=/work/empty"), "");
  EXPECT_EQ(empty.status, 201) << empty.body;
  EXPECT_EQ(api.get(files("?path=/work/empty")).body, "");
  auto bad_mode = api.call("PUT", files("?path=/work/x&mode=9z"), "x");
  EXPECT_EQ(bad_mode.status, 400);
}

TEST_F(api_files, a_100_mib_file_round_trips_unchanged) {
  auto api = admin();
  auto content = pseudo_random_bytes(size_t{100} << 20);
  auto put = api.call("PUT", files("?path=/big.bin"), content, {}, milliseconds(240'000));
  ASSERT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(put.json["size_bytes"], content.size());
  auto stat = api.get(files("/stat?path=/big.bin"));
  EXPECT_EQ(stat.json["size_bytes"], content.size());
  auto got = api.call("GET", files("?path=/big.bin"), "", {}, milliseconds(240'000));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body.size(), content.size());
  EXPECT_TRUE(got.body == content) << "the 100 MiB file came back changed";
  EXPECT_EQ(api.call("DELETE", files("?path=/big.bin")).status, 200);
}

TEST_F(api_files, mkdir_list_stat_and_recursive_delete) {
  auto api = admin();
  auto made = api.call("POST", files("/mkdir?path=/tree"));
  EXPECT_EQ(made.status, 201) << made.body;
  ASSERT_EQ(api.call("PUT", files("?path=/tree/one"), "1").status, 201);
  ASSERT_EQ(api.call("PUT", files("?path=/tree/sub/two"), "22").status, 201);

  auto list = api.get(files("/list?path=/tree"));
  ASSERT_EQ(list.status, 200) << list.body;
  std::map<std::string, json> entries;
  for (const auto& item : list.json["items"])
    entries[item["name"]] = item;
  ASSERT_EQ(entries.size(), 2u) << list.body;
  EXPECT_EQ(entries["one"]["type"], "file");
  EXPECT_EQ(entries["one"]["size_bytes"], 1);
  EXPECT_TRUE(entries["one"]["modified_at"].is_string());
  EXPECT_EQ(entries["sub"]["type"], "dir");
  EXPECT_EQ(api.get(files("/stat?path=/tree")).json["type"], "dir");

  auto not_empty = api.call("DELETE", files("?path=/tree"));
  EXPECT_GE(not_empty.status, 400) << "a non-empty directory needs recursive=true";
  EXPECT_TRUE(not_empty.is_error_shape());
  auto removed = api.call("DELETE", files("?path=/tree&recursive=true"));
  EXPECT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(api.get(files("/stat?path=/tree")).status, 404);
  EXPECT_EQ(api.get(files("/stat?path=/tree/sub/two")).status, 404);
}

TEST_F(api_files, move_renames_within_the_sandbox_and_refuses_bad_targets) {
  auto api = admin();
  ASSERT_EQ(api.call("PUT", files("?path=/moving/a.txt"), "payload").status, 201);
  auto moved = api.call("POST", files("/move?path=/moving/a.txt&to=/moving/b.txt"));
  ASSERT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(moved.json["path"], "/moving/b.txt");
  EXPECT_EQ(moved.json["from"], "/moving/a.txt");
  EXPECT_EQ(api.get(files("?path=/moving/a.txt")).status, 404);
  EXPECT_EQ(api.get(files("?path=/moving/b.txt")).body, "payload");

  auto missing = api.call("POST", files("/move?path=/moving/none&to=/moving/c"));
  EXPECT_EQ(missing.status, 404) << missing.body;
  for (const auto* to : {"", "&to=", "&to=relative"}) {
    auto bad = api.call("POST", files(std::string("/move?path=/moving/b.txt") + to));
    EXPECT_EQ(bad.status, 400) << to << ": " << bad.body;
    EXPECT_EQ(bad.json["error"]["code"], "invalid_argument") << bad.body;
  }
  EXPECT_EQ(api.get(files("?path=/moving/b.txt")).body, "payload")
    << "a refused move moves nothing";
}

TEST_F(api_files, stat_and_list_carry_owner_group_ids_and_symlink_targets) {
  auto api = admin();
  // Names come from the sandbox's own /etc/passwd and /etc/group; an id
  // without a name shows as its number.
  auto made = api.run(sandbox_, "mkdir -p /owners/dir && echo x > /owners/mine && "
                                "echo y > /owners/theirs && chown 65534:65534 /owners/theirs && "
                                "echo z > /owners/anon && chown 4321:4322 /owners/anon && "
                                "ln -s mine /owners/rel && ln -s /owners/dir /owners/abs && "
                                "ln -s rel /owners/chain && ln -s gone /owners/dangling && "
                                "touch -d @1700000000 /owners/mine && echo ok");
  ASSERT_EQ(made.stdout_bytes, "ok\n") << made.stderr_bytes;

  auto mine = api.get(files("/stat?path=/owners/mine"));
  ASSERT_EQ(mine.status, 200) << mine.body;
  EXPECT_EQ(mine.json["owner"], "root");
  EXPECT_EQ(mine.json["group"], "root");
  EXPECT_EQ(mine.json["uid"], 0);
  EXPECT_EQ(mine.json["gid"], 0);
  EXPECT_EQ(mine.json["modified_at"], "2023-11-14T22:13:20.000Z") << mine.body;
  EXPECT_TRUE(mine.json["symlink_target"].is_null()) << mine.body;

  auto theirs = api.get(files("/stat?path=/owners/theirs"));
  EXPECT_EQ(theirs.json["owner"], "nobody") << theirs.body;
  EXPECT_EQ(theirs.json["group"], "nobody");
  EXPECT_EQ(theirs.json["uid"], 65534);
  auto anon = api.get(files("/stat?path=/owners/anon"));
  EXPECT_EQ(anon.json["owner"], "4321") << anon.body;
  EXPECT_EQ(anon.json["group"], "4322");
  EXPECT_EQ(anon.json["gid"], 4322);

  auto rel = api.get(files("/stat?path=/owners/rel"));
  EXPECT_EQ(rel.json["type"], "symlink") << rel.body;
  EXPECT_EQ(rel.json["symlink_target"], "/owners/mine") << "relative targets become absolute";

  auto list = api.get(files("/list?path=/owners"));
  ASSERT_EQ(list.status, 200) << list.body;
  std::map<std::string, json> items;
  for (const auto& item : list.json["items"])
    items[item.value("name", "")] = item;
  ASSERT_EQ(items.size(), 8u) << list.body;
  EXPECT_EQ(items["abs"]["symlink_target"], "/owners/dir");
  EXPECT_EQ(items["chain"]["symlink_target"], "/owners/mine") << "resolved to the end";
  EXPECT_EQ(items["dangling"]["symlink_target"], "/owners/gone")
    << "unresolvable: the link's text, made absolute";
  EXPECT_EQ(items["theirs"]["owner"], "nobody");
  EXPECT_EQ(items["anon"]["uid"], 4321);
  EXPECT_EQ(items["dir"]["type"], "dir");
  EXPECT_TRUE(items["dir"]["symlink_target"].is_null());
  EXPECT_EQ(items["mine"]["modified_at"], "2023-11-14T22:13:20.000Z");
  for (const auto& [name, item] : items)
    for (const char* key : {"owner", "group", "uid", "gid", "modified_at", "symlink_target"})
      EXPECT_TRUE(item.contains(key)) << name << " lacks " << key;
}

TEST_F(api_files, missing_files_directories_and_bad_paths_get_json_errors) {
  auto api = admin();
  auto missing = api.get(files("?path=/no/such/file"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.error_code(), "not_found");
  EXPECT_EQ(api.get(files("/stat?path=/no/such")).status, 404);
  EXPECT_EQ(api.get(files("/list?path=/no/such")).status, 404);
  auto directory = api.get(files("?path=/etc"));
  EXPECT_EQ(directory.status, 400) << directory.body;
  EXPECT_TRUE(directory.is_error_shape());
  auto relative = api.get(files("?path=etc/passwd"));
  EXPECT_EQ(relative.status, 400);
  auto no_path = api.get(files(""));
  EXPECT_EQ(no_path.status, 400);
  EXPECT_TRUE(no_path.is_error_shape());
}

} // namespace
} // namespace airlock::test
