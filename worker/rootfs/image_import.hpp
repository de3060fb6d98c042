#pragma once
// Imports a template's root filesystem from an uploaded archive: a plain tar
// of the tree, an OCI image layout (`oci-layout`, `index.json`, `blobs/`) in a
// tar, or a `docker save` tar. Reading and decompression are libarchive's;
// writing is ours, relative to a directory descriptor of the root, one path
// component at a time without following symlinks, so that no entry can write
// outside the root whatever the archive holds.
//
// Entry paths: "." components, empty components and a trailing "/" are
// ignored ("./etc/x" is "etc/x"; "./" is the root itself). Absolute paths and
// ".." components are refused (invalid_argument) rather than rewritten, since
// no tool that builds images writes them. A path whose parent is a symlink or
// not a directory, in the archive or earlier in it, is refused too, even when
// the link would stay inside the root: layers record real paths.
//
// Image layers apply in order with the OCI whiteout rules (`.wh.NAME`,
// `.wh..wh..opq`); a plain tar is one such layer. Character and block devices
// are refused (the runtime provides /dev); FIFOs are created. Modes keep their
// setuid, setgid and sticky bits. Owners come from the archive when the
// process runs as root and are left as the process's own otherwise. Extended
// attributes (file capabilities, ACLs) are not applied.
//
// Synchronous and blocking (seconds to minutes for large images): run it on
// a helper thread, never in an actor.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

/// How the uploaded archive is laid out.
enum class archive_format {
  oci,    ///< a tar of an OCI image layout
  docker, ///< the output of `docker save`
  tar,    ///< a tar of the root filesystem itself
};

/// "oci", "docker" or "tar"; invalid_argument otherwise.
result<archive_format> parse_archive_format(std::string_view name);

/// The name parse_archive_format() accepts.
std::string_view to_string(archive_format format) noexcept;

/// Bounds on one import. Exceeding one fails with errc::resource_exhausted and
/// a message naming the limit.
struct archive_limits {
  /// Size of the uploaded archive file. Default: 8 GiB.
  uint64_t compressed_bytes_max = 8ull << 30;
  /// Sum of the sizes of the regular files written into the root; for oci and
  /// docker also, separately, the sum of the files unpacked from the outer
  /// archive into the temporary directory. Default: 32 GiB.
  uint64_t uncompressed_bytes_max = 32ull << 30;
  /// Entries read from the layers together (and from the outer archive of an
  /// oci or docker upload). Default: 1000000.
  uint64_t entries_max = 1'000'000;
  /// Length of an entry's path and of a link's target. Default: 4096.
  uint32_t path_bytes_max = 4096;
  /// Size of one JSON document of an image (index, manifest, config).
  /// Default: 16 MiB.
  uint64_t metadata_bytes_max = 16ull << 20;
};

/// What an import found and did.
struct image_config {
  // From the image config's "config" object; empty for a plain tar.
  std::vector<std::string> env; ///< "KEY=VALUE"
  std::string working_dir;
  std::string user;
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  /// "sha256:<hex>": of the image manifest (oci), of the image config, i.e.
  /// the image ID (docker: `docker save` holds no registry manifest), or of
  /// the archive file (tar).
  std::string digest;
  uint64_t layers = 0;  ///< layers applied
  uint64_t entries = 0; ///< layer entries applied, whiteouts included
  uint64_t bytes = 0;   ///< bytes of regular files written
};

/// One progress report. `step` is "unpack" (the outer archive of an oci or
/// docker upload), "layer <i>/<n>" or "finish"; bytes count the step's
/// input file as read (compressed bytes), so bytes_done reaches bytes_total.
struct import_progress {
  std::string step;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  uint32_t layer = 0;  ///< in a layer step: which one, from 1; else 0
  uint32_t layers = 0; ///< in a layer step: how many the image has; else 0
};

/// Called at the start and end of each step and about every 4 MiB of input, on
/// the importing thread. It may throw; the import then stops with the
/// exception after deleting its temporary directory.
using import_progress_fn = std::function<void(const import_progress&)>;

/// What a progress function throws to stop an import that is no longer
/// wanted (its build was cancelled).
struct import_stopped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Unpacks `archive` (a tar, plain or compressed with gzip, zstd, xz or bzip2,
/// detected from its content) laid out as `format` into `root`.
///
/// Preconditions: `root` is an existing empty directory that nothing else
/// writes to during the import. An oci or docker import unpacks the outer
/// archive into `<root>.import` (created, and deleted before returning,
/// whatever the outcome; one left by a crash is replaced).
///
/// Errors: wrong_state when `root` is not empty; invalid_argument for an
/// archive that is not a tar, is corrupt or truncated, is not laid out as
/// `format`, holds a refused entry (the message names it) or whose blob does
/// not match its digest; resource_exhausted when a limit is hit; io_error,
/// permission_denied or resource_exhausted (disk full) from the file system.
/// On failure `root` holds part of the image: the caller deletes it.
result<image_config> import_image(const std::filesystem::path& archive, archive_format format,
                                  const std::filesystem::path& root, const archive_limits& limits,
                                  const import_progress_fn& progress = {});

} // namespace airlock::worker
