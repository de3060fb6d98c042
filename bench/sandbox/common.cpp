#include "bench/sandbox/common.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "worker/rootfs/templates.hpp"

namespace airlock::sandbox_bench {

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

std::string percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  char line[128];
  std::snprintf(line, sizeof line, "p50 %8.3f  p90 %8.3f  p99 %8.3f ms  (n=%zu)", at(0.5), at(0.9),
                at(0.99), v.size());
  return line;
}

int spawn_wait(const std::vector<std::string>& argv, int stdout_fd) {
  std::vector<char*> args;
  args.reserve(argv.size());
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(stdout_fd >= 0 ? stdout_fd : null, 1);
    ::dup2(null, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (stdout_fd >= 0)
    ::close(stdout_fd);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  return wstatus;
}

result<host_pieces> open_host(const bench_options& opt) {
  host_pieces host;
  namespace_runtime_options rt;
  rt.state_dir = opt.data_dir + "/runtime";
  rt.cgroups.parent = "airlock-bench";
  rt.net.nft_table = "airlock_bench";
  rt.net.interface_prefix = "ab";
  rt.address_pool = "10.202.0.0/16";
  rt.id_range_base = 400000000;
  rt.slots_max = 256;
  auto runtime = namespace_runtime::open(rt);
  if (!runtime)
    return runtime.error();
  host.runtime = std::move(*runtime);
  auto store = storage::open_rocksdb_store(opt.data_dir + "/store");
  if (!store)
    return store.error();
  host.store = std::move(*store);
  rootfs_options fs;
  fs.data_dir = opt.data_dir;
  fs.image_size_mb = 8192;
  fs.disk_quota = false;
  auto driver = make_rootfs_driver(fs);
  if (!driver)
    return driver.error();
  host.rootfs = std::move(*driver);
  template_options templates;
  template_builder builder(*host.rootfs, templates);
  if (auto built = builder.ensure("minimal"); !built)
    return built.error();
  return host;
}

sandbox_handle handle_of(const host_pieces& host, const std::string& id) {
  for (auto& handle : host.runtime->list())
    if (handle.id == id)
      return handle;
  return {};
}

} // namespace airlock::sandbox_bench
