// Behaviour only the RocksDB store has: data on disk, the directory lock and
// column families written by other versions.

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "storage/kv_store.hpp"
#include "tests/storage/test_support.hpp"

namespace airlock::storage {
namespace {

std::unique_ptr<kv_store> open_or_fail(const std::string& dir) {
  auto opened = open_rocksdb_store(dir);
  EXPECT_TRUE(opened) << opened.error().message;
  return opened ? std::move(*opened) : nullptr;
}

/// Holds a POSIX write lock on `dir`/LOCK from a child process, the way a
/// second airlockd's RocksDB would, until the object goes.
class lock_holder_process {
public:
  explicit lock_holder_process(const std::string& dir) {
    const std::string lock_path = dir + "/LOCK"; // built before fork: no malloc in the child
    int ready[2];
    int release[2];
    if (::pipe(ready) != 0 || ::pipe(release) != 0)
      throw std::runtime_error("pipe failed");
    child_ = ::fork();
    if (child_ == 0) {
      // The child's copy of the write end would keep the release pipe open.
      ::close(ready[0]);
      ::close(release[1]);
      hold(lock_path.c_str(), ready[1], release[0]);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_fd_ = release[1];
    char byte = 'n';
    locked_ = ::read(ready[0], &byte, 1) == 1 && byte == 'y';
    ::close(ready[0]);
  }
  ~lock_holder_process() {
    ::close(release_fd_); // EOF tells the child to exit
    int ignored = 0;
    if (child_ > 0)
      ::waitpid(child_, &ignored, 0);
  }
  lock_holder_process(const lock_holder_process&) = delete;
  lock_holder_process& operator=(const lock_holder_process&) = delete;
  bool locked() const noexcept { return locked_; }

private:
  /// Child only: async-signal-safe calls, then _exit.
  [[noreturn]] static void hold(const char* lock_path, int ready_fd, int release_fd) {
    const int fd = ::open(lock_path, O_RDWR | O_CREAT, 0644);
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    const char byte = fd >= 0 && ::fcntl(fd, F_SETLK, &lock) == 0 ? 'y' : 'n';
    [[maybe_unused]] auto wrote = ::write(ready_fd, &byte, 1);
    char ignored = 0;
    [[maybe_unused]] auto got = ::read(release_fd, &ignored, 1);
    ::_exit(0);
  }

  pid_t child_ = -1;
  int release_fd_ = -1;
  bool locked_ = false;
};

TEST(rocksdb_store, synced_writes_survive_closing_and_reopening) {
  test::temp_dir dir;
  {
    auto store = open_or_fail(dir.path());
    ASSERT_TRUE(store);
    write_batch batch;
    batch.put(keyspace::operations, "op_1", "record");
    batch.put(keyspace::active_ops, "op_1", "");
    batch.put(keyspace::idempotency_keys, std::string("t1\0k", 4), "op_1");
    ASSERT_TRUE(store->write(batch, durability::synced));
    ASSERT_TRUE(store->put(keyspace::meta, "format", "1", durability::synced));
  }
  auto store = open_or_fail(dir.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->get(keyspace::operations, "op_1")->value_or(""), "record");
  EXPECT_TRUE(store->get(keyspace::active_ops, "op_1")->has_value());
  EXPECT_EQ(store->get(keyspace::idempotency_keys, std::string("t1\0k", 4))->value_or(""), "op_1");
  EXPECT_EQ(store->get(keyspace::meta, "format")->value_or(""), "1");
}

TEST(rocksdb_store, a_second_open_in_the_same_process_fails_with_io_error_naming_the_cause) {
  test::temp_dir dir;
  auto first = open_or_fail(dir.path());
  ASSERT_TRUE(first);
  auto second = open_rocksdb_store(dir.path());
  ASSERT_FALSE(second);
  EXPECT_EQ(second.code(), errc::io_error);
  EXPECT_NE(second.error().message.find("another airlockd may be using the data directory"),
            std::string::npos)
    << second.error().message;
  EXPECT_NE(second.error().message.find(dir.path()), std::string::npos);
}

TEST(rocksdb_store, open_fails_with_io_error_while_another_process_holds_the_lock) {
  test::temp_dir dir;
  lock_holder_process other(dir.path());
  ASSERT_TRUE(other.locked());
  auto opened = open_rocksdb_store(dir.path());
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.code(), errc::io_error);
  EXPECT_NE(opened.error().message.find("another airlockd may be using the data directory"),
            std::string::npos)
    << opened.error().message;
}

TEST(rocksdb_store, open_of_an_unusable_directory_fails_with_io_error) {
  test::temp_dir dir;
  const std::string file = dir.path() + "/not_a_directory";
  std::ofstream(file) << "x";
  auto opened = open_rocksdb_store(file + "/db");
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.code(), errc::io_error) << opened.error().message;
}

TEST(rocksdb_store, open_without_create_if_missing_fails_on_an_empty_directory) {
  test::temp_dir dir;
  rocksdb_options options;
  options.create_if_missing = false;
  auto opened = open_rocksdb_store(dir.path() + "/db", options);
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.code(), errc::io_error) << opened.error().message;
}

TEST(rocksdb_store, opens_a_database_holding_a_column_family_this_build_does_not_know) {
  // A newer airlock may add a keyspace; an older one must still open the
  // directory (RocksDB refuses unless every family is opened).
  test::temp_dir dir;
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir.path(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    rocksdb::ColumnFamilyHandle* extra = nullptr;
    ASSERT_TRUE(db->CreateColumnFamily({}, "from_the_future", &extra).ok());
    ASSERT_TRUE(db->DestroyColumnFamilyHandle(extra).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  auto store = open_or_fail(dir.path());
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->put(keyspace::workers, "wk_1", "w"));
}

} // namespace
} // namespace airlock::storage
