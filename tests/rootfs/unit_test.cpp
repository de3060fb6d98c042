// Unit tests of the rootfs layer's pure parts: apt sources, manifests,
// debootstrap progress, mountinfo, names; and the process runner.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "tests/rootfs/test_support.hpp"
#include "tests/support/host.hpp"
#include "tests/support/wait.hpp"
#include "worker/command/command.hpp"
#include "worker/rootfs/apt_sources.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/templates.hpp"

namespace airlock::worker {
namespace {

TEST(apt_sources, finds_the_bookworm_main_uri_in_one_line_format) {
  auto text = "# deb http://old.example/debian bookworm main\n"
              "deb-src http://src.example/debian bookworm main\n"
              "deb http://security.debian.org/debian-security bookworm-security main\n"
              "deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://mirror.example/debian "
              "bookworm contrib main non-free\n"
              "deb http://later.example/debian bookworm main\n";
  EXPECT_EQ(find_mirror_in_list(text, "bookworm"), "http://mirror.example/debian");
}

TEST(apt_sources, skips_lines_without_main_or_for_another_suite) {
  auto text = "deb http://a.example/debian bookworm contrib\n"
              "deb http://b.example/debian bookworm-updates main\n"
              "deb cdrom:[Debian GNU/Linux 12]/ bookworm main\n"
              "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n";
  EXPECT_EQ(find_mirror_in_list(text, "bookworm"), std::nullopt);
  EXPECT_EQ(find_mirror_in_list("deb http://c.example/debian bookworm main\r\n", "bookworm"),
            "http://c.example/debian");
}

TEST(apt_sources, finds_the_bookworm_main_uri_in_deb822_format) {
  auto text = "Types: deb\n"
              "# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
              "URIs: http://deb.debian.org/debian\n"
              "Suites: bookworm bookworm-updates\n"
              "Components: main\n"
              "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
              "\n"
              "Types: deb\n"
              "URIs: http://deb.debian.org/debian-security\n"
              "Suites: bookworm-security\n"
              "Components: main\n";
  EXPECT_EQ(find_mirror_in_deb822(text, "bookworm"), "http://deb.debian.org/debian");
}

TEST(apt_sources, deb822_honours_enabled_types_continuations_and_case) {
  auto text =
    "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\n"
    "Enabled: no\n\n"
    "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n"
    "\n"
    "types: deb deb-src\nuris: http://on.example/debian\n  http://second.example/debian\n"
    "suites: bookworm\ncomponents: contrib\n main\n";
  EXPECT_EQ(find_mirror_in_deb822(text, "bookworm"), "http://on.example/debian");
  EXPECT_EQ(find_mirror_in_deb822(text, "trixie"), std::nullopt);
}

TEST(apt_sources, reads_the_host_files_in_apt_order_and_names_them_when_nothing_matches) {
  test::scratch_dir scratch;
  auto apt = scratch.path();
  ASSERT_TRUE(make_dirs(apt / "sources.list.d"));
  ASSERT_TRUE(write_file(apt / "sources.list.d" / "b.sources",
                         "Types: deb\nURIs: http://b.example/debian\nSuites: bookworm\n"
                         "Components: main\n"));
  ASSERT_TRUE(write_file(apt / "sources.list.d" / "a.list.disabled",
                         "deb http://disabled.example/debian bookworm main\n"));
  ASSERT_TRUE(
    write_file(apt / "sources.list.d" / "a.list", "deb http://a.example/x stable main\n"));
  auto found = find_host_mirror(apt, "bookworm");
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(*found, "http://b.example/debian");
  auto missing = find_host_mirror(apt, "trixie");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), errc::not_found);
  EXPECT_NE(missing.error().message.find("a.list"), std::string::npos);
  EXPECT_NE(missing.error().message.find("template_options.mirror"), std::string::npos);
}

TEST(template_manifest, round_trips_through_json) {
  template_manifest manifest;
  manifest.name = "base";
  manifest.created_unix_s = 1'700'000'000;
  manifest.size_bytes = 388u << 20;
  manifest.files = 12345;
  manifest.source = "debootstrap --variant=minbase bookworm http://deb.debian.org/debian";
  manifest.start_cmd = "server --port 8080";
  manifest.ready_cmd = "test -e /run/server.ready";
  auto json = manifest_to_json(manifest);
  EXPECT_NE(json.find("2023-11-14T22:13:20Z"), std::string::npos) << json;
  auto parsed = parse_manifest(json);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->name, "base");
  EXPECT_EQ(parsed->created_unix_s, manifest.created_unix_s);
  EXPECT_EQ(parsed->size_bytes, manifest.size_bytes);
  EXPECT_EQ(parsed->files, manifest.files);
  EXPECT_EQ(parsed->source, manifest.source);
  EXPECT_EQ(parsed->start_cmd, manifest.start_cmd);
  EXPECT_EQ(parsed->ready_cmd, manifest.ready_cmd);
}

TEST(template_manifest, rejects_broken_and_newer_manifests) {
  EXPECT_EQ(parse_manifest("{not json").code(), errc::corrupt_record);
  EXPECT_EQ(parse_manifest("[]").code(), errc::corrupt_record);
  EXPECT_EQ(parse_manifest(R"({"format_version": 1, "name": "x"})").code(), errc::corrupt_record);
  EXPECT_EQ(parse_manifest(R"({"format_version": 1, "name": 3, "created_unix_s": 1,
                               "size_bytes": 2, "source": "s"})")
              .code(),
            errc::corrupt_record);
  EXPECT_EQ(parse_manifest(R"({"format_version": 99, "name": "x", "created_unix_s": 1,
                               "size_bytes": 2, "source": "s"})")
              .code(),
            errc::unsupported_version);
}

TEST(debootstrap_progress, advances_through_the_phases_monotonically) {
  debootstrap_progress progress(4);
  std::vector<std::string> lines = {
    "I: Retrieving InRelease ",
    "I: Checking Release signature",
    "I: Valid Release signature (key id 4D64FEC119C2029067D6E791F8D2585B8783D481)",
    "I: Retrieving Packages ",
    "I: Validating Packages ",
    "I: Resolving dependencies of required packages...",
    "I: Resolving dependencies of base packages...",
    "I: Checking component main on http://deb.debian.org/debian...",
    "I: Retrieving adduser 3.134",
    "I: Validating adduser 3.134",
    "I: Retrieving bash 5.2.15-2+b2",
    "I: Validating bash 5.2.15-2+b2",
    "I: Retrieving dpkg 1.21.22",
    "I: Validating dpkg 1.21.22",
    "I: Retrieving python3 3.11.2-1+b1",
    "I: Validating python3 3.11.2-1+b1",
    "I: Chosen extractor for .deb packages: dpkg-deb",
    "I: Extracting bash...",
    "I: Extracting dpkg...",
    "I: Installing required packages...",
    "I: Unpacking required packages...",
    "I: Unpacking bash...",
    "I: Unpacking dpkg...",
    "I: Configuring required packages...",
    "I: Configuring dpkg...",
    "I: Configuring bash...",
    "dpkg: warning: something unrelated",
    "I: Unpacking the base system...",
    "I: Unpacking adduser...",
    "I: Unpacking python3...",
    "I: Configuring the base system...",
    "I: Configuring adduser...",
    "I: Configuring python3...",
    "I: Base system installed successfully.",
  };
  int last = -1;
  std::vector<std::string> phases;
  for (const auto& line : lines) {
    auto now = progress.feed(line);
    EXPECT_GE(now.percent, last) << line;
    EXPECT_LE(now.percent, 100);
    last = now.percent;
    if (phases.empty() || phases.back() != now.phase)
      phases.emplace_back(now.phase);
  }
  EXPECT_EQ(last, 98);
  std::vector<std::string> expected = {"resolve",   "download", "extract",   "unpack",
                                       "configure", "unpack",   "configure", "installed"};
  EXPECT_EQ(phases, expected);
}

TEST(debootstrap_progress, download_percentage_tracks_the_package_count) {
  debootstrap_progress progress(10);
  debootstrap_progress::report now;
  for (int i = 0; i < 5; ++i)
    now = progress.feed("I: Retrieving pkg" + std::to_string(i) + " 1.0");
  EXPECT_EQ(now.phase, "download");
  EXPECT_EQ(now.percent, 25); // 5 + 40 * 5/10
  // More packages than expected never push it past the download range.
  for (int i = 0; i < 50; ++i)
    now = progress.feed("I: Retrieving more" + std::to_string(i) + " 1.0");
  EXPECT_LT(now.percent, 45);
}

TEST(mountinfo, parses_mount_points_types_and_escaped_sources) {
  auto text = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
              "95 22 0:52 / /var/lib/air\\040lock/rootfs rw,nodev,noatime shared:50 - btrfs "
              "/dev/loop3 rw,space_cache=v2,subvolid=5,subvol=/\n"
              "garbage line\n";
  auto mounts = parse_mountinfo(text);
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[1].mount_point, "/var/lib/air lock/rootfs");
  EXPECT_EQ(mounts[1].fs_type, "btrfs");
  EXPECT_EQ(mounts[1].source, "/dev/loop3");
  EXPECT_EQ(mounts[0].fs_type, "ext4");
}

TEST(names, accept_ids_and_refuse_path_tricks) {
  EXPECT_TRUE(is_valid_name("sbx_01HXYZ"));
  EXPECT_TRUE(is_valid_name("base"));
  for (std::string_view bad : {"", "..", ".hidden", "a/b", "a.staging", "-x", "a b"})
    EXPECT_FALSE(is_valid_name(bad)) << bad;
  EXPECT_FALSE(is_valid_name(std::string(129, 'a')));
  EXPECT_EQ(check_name("sandbox id", "../etc").code, errc::invalid_argument);
}

TEST(run_command, hands_over_output_lines_and_the_exit_code) {
  std::vector<std::string> lines;
  command_options options;
  options.on_line = [&lines](std::string_view line) { lines.emplace_back(line); };
  auto ran = run_command({"sh", "-c", "echo one; echo two >&2; printf three; exit 3"}, options);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->exit_code, 3);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_NE(ran->output.find("three"), std::string::npos);
}

TEST(run_command, kills_a_program_that_overruns_its_deadline) {
  command_options options;
  options.timeout_ms = 200;
  auto started = std::chrono::steady_clock::now();
  auto ran = run_command({"sleep", "30"}, options);
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.code(), errc::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(run_command, cancels_the_whole_process_group) {
  std::atomic<bool> cancel{false};
  command_options options;
  options.cancel = &cancel;
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  // The grandchild holds the pipe: only a group kill ends the wait.
  auto ran = run_command({"sh", "-c", "sleep 30 & sleep 30; wait"}, options);
  canceller.join();
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.code(), errc::cancelled);
}

// A tool gets none of the worker's descriptors, close-on-exec or not: a
// tool that outlives a killed worker must not keep its lock or its ports.
TEST(run_command, a_tool_inherits_no_descriptor_of_the_worker) {
  airlock::test::temp_dir dir("airlock-cmd");
  const int inheritable = ::open((dir.path() + "/lock").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(inheritable, 3);
  auto ran = run_command({"sh", "-c", "ls /proc/self/fd"});
  ::close(inheritable);
  ASSERT_TRUE(ran) << ran.error().message;
  std::istringstream listed(ran->output);
  for (std::string fd; listed >> fd;)
    EXPECT_LE(std::stoi(fd), 3) << "fd " << fd << " reached the tool (ls opens 3 itself)";
}

// A tool whose worker dies gets SIGTERM: nobody is left to read its output.
TEST(run_command, a_tool_ends_when_the_worker_that_ran_it_is_killed) {
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  const pid_t worker = ::fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    command_options options;
    options.on_line = [&report](std::string_view line) {
      (void)!::write(report[1], line.data(), line.size());
      (void)!::write(report[1], "\n", 1);
    };
    (void)run_command({"sh", "-c", "echo $$; exec sleep 600"}, options);
    ::_exit(0);
  }
  ::close(report[1]);
  std::string line;
  char c = 0;
  while (::read(report[0], &c, 1) == 1 && c != '\n')
    line += c;
  ::close(report[0]);
  ASSERT_FALSE(line.empty()) << "the tool did not start";
  const pid_t tool = std::stoi(line);
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  ASSERT_EQ(::waitpid(worker, nullptr, 0), worker);
  // Reparented and reaped by init once it has ended: bounded.
  EXPECT_TRUE(airlock::test::wait_for([tool] { return ::kill(tool, 0) != 0; }))
    << "the tool (pid " << tool << ") outlived its worker";
}

// What a child does between clone and exec: keeps exactly what it names.
TEST(close_fds_except, leaves_open_only_the_descriptors_it_keeps) {
  int result[2];
  ASSERT_EQ(::pipe2(result, 0), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int a = ::open("/dev/null", O_RDONLY);
    const int b = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int c = ::fcntl(a, F_DUPFD, 40);
    const int keep[] = {c, result[1], -1};
    if (close_fds_except(keep, std::size(keep)) != 0)
      ::_exit(2);
    // One byte per descriptor 0..63: open or not.
    char open_fds[64];
    for (int fd = 0; fd < 64; ++fd)
      open_fds[fd] = ::fcntl(fd, F_GETFD) >= 0 ? '1' : '0';
    (void)a;
    (void)b;
    (void)!::write(result[1], open_fds, sizeof open_fds);
    ::_exit(0);
  }
  ::close(result[1]);
  std::string open_fds(64, '?');
  ASSERT_EQ(::read(result[0], open_fds.data(), open_fds.size()), 64);
  ::close(result[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string expected(64, '0');
  expected[static_cast<size_t>(result[1])] = '1';
  expected[40] = '1';
  // Everything else goes, the test's own stdio (0..2) included.
  for (int fd = 0; fd < 64; ++fd)
    if (open_fds[static_cast<size_t>(fd)] == '1' && expected[static_cast<size_t>(fd)] == '0')
      ADD_FAILURE() << "fd " << fd << " stayed open";
  EXPECT_EQ(open_fds[40], '1');
  EXPECT_EQ(open_fds[static_cast<size_t>(result[1])], '1');
  EXPECT_EQ(std::count(open_fds.begin(), open_fds.end(), '1'), 2) << open_fds;
}

TEST(run_command, says_which_program_is_missing) {
  auto ran = run_command({"airlock-no-such-program"});
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.code(), errc::not_found);
  EXPECT_NE(ran.error().message.find("airlock-no-such-program"), std::string::npos);
  auto checked = run_checked("listing", {"ls", "/airlock/no/such/dir"});
  EXPECT_EQ(checked.code, errc::io_error);
  EXPECT_NE(checked.message.find("No such file"), std::string::npos) << checked.message;
}

TEST(run_command, feeds_stdin_larger_than_a_pipe_buffer) {
  command_options options;
  options.stdin_text = std::string(size_t{1} << 20, 'x'); // more than a pipe holds at once
  auto ran = run_command({"wc", "-c"}, options);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->exit_code, 0);
  EXPECT_NE(ran->output.find("1048576"), std::string::npos) << ran->output;
}

TEST(run_command, keeps_only_the_end_of_long_output_and_says_so) {
  command_options options;
  options.output_bytes_max = 100;
  auto ran = run_command({"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a; echo END"}, options);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->output.size(), 100u);
  EXPECT_TRUE(ran->output_cut);
  EXPECT_EQ(ran->output.substr(96), "END\n");
}

TEST(run_command, runs_with_an_empty_environment_when_asked) {
  ::setenv("AIRLOCK_RUN_COMMAND_PROBE", "leaked", 1);
  command_options options;
  options.clean_env = true;
  options.env = {"ONLY=this"};
  auto ran = run_command({"/usr/bin/env"}, options);
  ::unsetenv("AIRLOCK_RUN_COMMAND_PROBE");
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->output, "ONLY=this\n");
}

} // namespace
} // namespace airlock::worker
