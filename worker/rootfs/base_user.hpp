#pragma once
// The unprivileged account of the `base` template, as E2B's base image has
// it: `user` (uid and gid 1000), home /home/user with the skeleton's
// dotfiles, /bin/bash, and passwordless sudo through /etc/sudoers.d/user.
// Written straight into the tree's files (nothing of the tree is executed),
// so it works on any host that can build the tree.
//
// Blocking (file writes): on the template build's helper thread.

#include <cstdint>
#include <filesystem>
#include <string>

#include "schema/errc.hpp"

namespace airlock::worker {

/// The account added to a Debian tree.
struct user_account {
  /// Default: "user".
  std::string name = "user";
  /// Default: 1000.
  uint32_t uid = 1000;
  /// The account's own group, named as the account. Default: 1000.
  uint32_t gid = 1000;
  /// Default: "/bin/bash".
  std::string shell = "/bin/bash";
  /// An /etc/sudoers.d entry giving it `ALL=(ALL:ALL) NOPASSWD: ALL`. Default: true.
  bool sudo = true;
};

/// What the account changes in a tree; part of the base template's source
/// text, so that a base built without it (or with another) is built again.
std::string describe_account(const user_account& account);

/// Adds `account` to the tree at `root`: lines in etc/passwd, etc/group and
/// (when present) etc/shadow and etc/gshadow, appended so the files keep
/// their owners and modes; home/<name> (0750) with etc/skel's files, owned
/// by uid:gid; etc/sudoers.d/<name> (0440, root's). Idempotent: an account
/// already listed is left as it is. invalid_argument when another name holds
/// the uid or gid; not_found without etc/passwd or etc/group.
status add_user_account(const std::filesystem::path& root, const user_account& account);

} // namespace airlock::worker
