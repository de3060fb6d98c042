#pragma once
// The one way airlock writes a small file that must never be seen half
// written (keys, configs, state and metadata files): a private temporary
// sibling, the final mode set on it, the bytes synced, a rename (or a link
// when an existing file must win) and a sync of the directory.
//
// It lives in schema/ because every library that writes such a file (crypto,
// gateway, worker, airlockd, cli) links schema, and it needs nothing but POSIX.

#include <sys/types.h>

#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock {

/// What write_file_atomically does when `path` already exists.
enum class existing_file {
  replace, ///< rename(2) over it: readers see the old or the new bytes
  keep,    ///< link(2): the existing file stays and the call fails with already_exists;
           ///< of two concurrent creators exactly one wins
};

/// Writes `bytes` to `path` so that a reader, or a crash, sees either the old
/// file (or none) or the whole new one:
///  1. a temporary sibling `<path>.tmp.XXXXXX` is created with mode 0600 (so it
///     is never readable by others, whatever the umask);
///  2. its mode becomes `mode` (fchmod, umask not applied) before it gets the
///     final name;
///  3. the bytes are written in full (short writes and EINTR are retried) and
///     fsynced;
///  4. it is renamed over `path` (or linked to it, see existing_file);
///  5. the directory is fsynced, so the new name survives a crash.
/// On a failure before step 4 the temporary file is removed and `path` is as
/// it was. Errors: permission_denied (EACCES, EPERM), resource_exhausted
/// (ENOSPC, EDQUOT), already_exists (keep and `path` exists), io_error
/// otherwise; the message names the step and the path.
/// Blocking (fsync): never call it from an event-based actor. The parent
/// directory must exist.
status write_file_atomically(const std::string& path, std::string_view bytes, mode_t mode = 0600,
                             existing_file if_exists = existing_file::replace);

/// Creates `dir` and each missing parent with mode 0700 (before the umask), so
/// that nobody else may even list where a secret is kept; existing
/// directories are left as they are. Empty `dir`: nothing to do. Errors as
/// write_file_atomically's.
status make_private_directories(const std::string& dir);

} // namespace airlock
