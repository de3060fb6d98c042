#pragma once
// Who a sandbox's process runs as, the environment every process starts
// with, and a ready_cmd's retry loop: shared by the node's processes and
// builds and the start_cmd a microVM base runs before its memory is saved
// (sandbox_start.cpp).

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "schema/cluster.hpp"
#include "schema/errc.hpp"

namespace airlock::worker {

/// PATH of a process whose environment names none.
inline constexpr const char* default_process_path =
  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The user a name stands for without the sandbox's /etc/passwd: root for ""
/// or "root", a numeric uid (its gid the same); invalid_argument for a name
/// no passwd can hold. nullopt: a name to look up with find_user.
std::optional<result<schema::process_user>> user_without_passwd(const std::string& user);

/// The uid, gid and home of `user` in the text of an /etc/passwd.
result<schema::process_user> find_user(std::string_view passwd, const std::string& user);

/// What every process's environment starts with: PATH, the variables that
/// make TLS clients trust the egress proxy's CA, and HOME when known.
std::map<std::string, std::string> fixed_process_env(const std::string& path,
                                                     const schema::process_user& user);

/// A shell line that runs `cmd` once a second until it succeeds, at most
/// `attempts` times, and fails after the last (a template's ready_cmd).
std::string retried_each_second(const std::string& cmd, int attempts);

} // namespace airlock::worker
