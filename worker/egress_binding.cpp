#include "worker/egress_binding.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "schema/unique_fd.hpp"
#include "worker/egress/egress_proxy.hpp"

namespace airlock::worker {

egress_binding::egress_binding(std::shared_ptr<egress::egress_proxy> proxy)
    : proxy_(std::move(proxy)) {}

void egress_binding::set_root_ca(std::string pem) {
  std::lock_guard guard(mutex_);
  root_ca_ = std::move(pem);
}

std::string egress_binding::root_ca() const {
  std::lock_guard guard(mutex_);
  return root_ca_;
}

void egress_binding::attach(egress::sandbox_view view, const std::string& host_interface) {
  if (!proxy_)
    return;
  std::lock_guard guard(mutex_);
  proxy_->attach(view);
  if (int index =
        host_interface.empty() ? 0 : static_cast<int>(::if_nametoindex(host_interface.c_str()));
      index != 0) {
    interface_of_[view.sandbox_id] = index;
    by_interface_[index] = std::make_shared<const egress::sandbox_view>(view);
  }
  attached_[view.sandbox_id] = std::move(view);
}

std::shared_ptr<const egress::sandbox_view> egress_binding::by_interface(int ifindex) const {
  std::lock_guard guard(mutex_);
  auto found = by_interface_.find(ifindex);
  return found == by_interface_.end() ? nullptr : found->second;
}

void egress_binding::detach(const std::string& sandbox_id) {
  if (!proxy_)
    return;
  std::lock_guard guard(mutex_);
  auto found = attached_.find(sandbox_id);
  if (found == attached_.end())
    return;
  proxy_->detach(found->second.address);
  attached_.erase(found);
  if (auto index = interface_of_.find(sandbox_id); index != interface_of_.end()) {
    by_interface_.erase(index->second);
    interface_of_.erase(index);
  }
}

bool egress_binding::update(const std::string& sandbox_id,
                            const std::function<void(egress::sandbox_view&)>& change) {
  std::lock_guard guard(mutex_);
  auto found = attached_.find(sandbox_id);
  if (found == attached_.end())
    return false;
  change(found->second);
  if (proxy_)
    proxy_->attach(found->second);
  if (auto index = interface_of_.find(sandbox_id); index != interface_of_.end())
    by_interface_[index->second] = std::make_shared<const egress::sandbox_view>(found->second);
  return true;
}

bool egress_binding::set_policy(const std::string& sandbox_id,
                                const schema::egress_policy& policy) {
  return update(sandbox_id, [&policy](egress::sandbox_view& view) { view.policy = policy; });
}

bool egress_binding::set_owner(const std::string& sandbox_id, const std::string& tenant_id,
                               const schema::egress_policy& policy) {
  return update(sandbox_id, [&](egress::sandbox_view& view) {
    view.tenant_id = tenant_id;
    view.policy = policy;
  });
}

namespace {

status write_error(const std::string& what, int error) {
  return make_status(errc::io_error, what + ": " + std::strerror(error));
}

/// Opens `path` (relative, resolved inside `root`) with `flags`.
result<unique_fd> open_inside(int root, const std::string& path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, root, path.c_str(), &how, sizeof how);
  if (fd < 0)
    return write_error("open /" + path + " in the sandbox's rootfs", errno);
  return unique_fd(static_cast<int>(fd));
}

status write_all(int fd, const std::string& text, const std::string& what) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return write_error("write " + what, errno);
    done += static_cast<size_t>(n);
  }
  return status::ok();
}

status put_file(int root, const std::string& path, const std::string& text, int extra_flags) {
  auto file = open_inside(root, path, O_WRONLY | O_CREAT | extra_flags, 0644);
  if (!file)
    return file.error();
  return write_all(file->get(), text, "/" + path);
}

/// mkdir -p of a relative path inside `root` (each step resolved inside it).
status make_dirs_inside(int root, const std::string& path) {
  size_t at = 0;
  while (at != std::string::npos) {
    at = path.find('/', at + 1);
    std::string step = path.substr(0, at);
    auto parent = step.rfind('/');
    std::string dir = parent == std::string::npos ? "." : step.substr(0, parent);
    std::string name = parent == std::string::npos ? step : step.substr(parent + 1);
    auto base = open_inside(root, dir, O_PATH | O_DIRECTORY, 0);
    if (!base)
      return base.error();
    if (::mkdirat(base->get(), name.c_str(), 0755) != 0 && errno != EEXIST)
      return write_error("mkdir /" + step + " in the sandbox's rootfs", errno);
  }
  return status::ok();
}

} // namespace

status prepare_egress_files(const std::string& rootfs_path, const std::string& nameserver,
                            const std::string& root_ca_pem) {
  unique_fd root(::open(rootfs_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root)
    return write_error("open rootfs " + rootfs_path, errno);
  if (auto made = make_dirs_inside(root.get(), "etc"); !made)
    return made;
  // Any resolver the guest names is redirected to the egress proxy's; this one
  // makes the usual path fast and obvious.
  if (auto written =
        put_file(root.get(), "etc/resolv.conf",
                 "nameserver " + nameserver + "\noptions timeout:2 attempts:2\n", O_TRUNC);
      !written)
    return written;
  if (root_ca_pem.empty())
    return status::ok();
  if (auto made = make_dirs_inside(root.get(), "etc/ssl/certs"); !made)
    return made;
  std::string ca_path = std::string(sandbox_ca_file).substr(1);
  if (auto written = put_file(root.get(), ca_path, root_ca_pem, O_TRUNC); !written)
    return written;
  std::string bundle = std::string(sandbox_ca_bundle).substr(1);
  std::string block = "\n# airlock egress CA\n" + root_ca_pem;
  return put_file(root.get(), bundle, block, O_APPEND);
}

} // namespace airlock::worker
