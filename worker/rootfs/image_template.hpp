#pragma once
// Template versions made from an uploaded image (OCI layout, `docker save`
// or a root filesystem tar): unpacked into a staging tree, described by a
// manifest that carries the image's defaults, sealed. The guest agent is not
// put in: the worker runs its own file as every sandbox's init.
// Synchronous; the worker runs it on a helper thread.

#include <filesystem>
#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "worker/rootfs/image_import.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/rootfs/templates.hpp"

namespace airlock::worker {

struct image_template_request {
  std::string name; ///< the template's name in the driver
  std::filesystem::path archive;
  archive_format format = archive_format::tar;
  archive_limits limits;
  /// Replaces the image's Entrypoint and Cmd as the start_cmd when set.
  std::string start_cmd;
};

/// Builds template `request.name` from the archive. Idempotent: a sealed
/// template of that name answers its manifest without reading the archive.
/// Errors: those of import_image, cancelled when `progress` throws
/// import_stopped, and of the driver; on failure nothing of the template is
/// left.
result<template_manifest> build_image_template(rootfs_driver& driver,
                                               const image_template_request& request,
                                               const import_progress_fn& progress = {});

/// The shell line that runs an image's Entrypoint followed by its Cmd, each
/// word single-quoted; empty when both are.
std::string start_cmd_of_image(const image_config& image);

} // namespace airlock::worker
