#include "worker/rootfs/templates.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "schema/atomic_file.hpp"
#include "worker/command/command.hpp"
#include "worker/rootfs/apt_sources.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

constexpr uint32_t manifest_format_version = 1;

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

void report(const build_control& control, std::string_view phase, int percent,
            std::string_view line = {}) {
  if (control.progress)
    control.progress(phase, percent, line);
}

status check_cancel(const build_control& control) {
  if (control.cancel != nullptr && control.cancel->load())
    return make_status(errc::cancelled, "the template build was cancelled");
  return status::ok();
}

status copy_executable(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec)
    return make_status(errc::io_error,
                       "cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
  if (::chmod(to.c_str(), 0755) != 0)
    return errno_status("cannot make " + to.string() + " executable");
  return status::ok();
}

// A dynamically linked busybox would find no libc inside the minimal template.
result<bool> is_static_elf(const std::filesystem::path& path) {
  auto fd = open_fd(path, O_RDONLY);
  if (!fd)
    return fd.error();
  Elf64_Ehdr header{};
  if (::pread(fd->get(), &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)
      || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0
      || header.e_ident[EI_CLASS] != ELFCLASS64)
    return make_status(errc::invalid_argument, path.string() + " is not a 64-bit ELF executable");
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr program{};
    auto offset = static_cast<off_t>(header.e_phoff + uint64_t{i} * header.e_phentsize);
    if (::pread(fd->get(), &program, sizeof program, offset)
        != static_cast<ssize_t>(sizeof program))
      return make_status(errc::invalid_argument, path.string() + " has a truncated ELF header");
    if (program.p_type == PT_INTERP)
      return false;
  }
  return true;
}

status install_busybox(const std::filesystem::path& dir, const template_options& options) {
  auto is_static = is_static_elf(options.busybox);
  if (!is_static)
    return make_status(is_static.code(),
                       is_static.error().message + " (install the busybox-static package)");
  if (!*is_static)
    return make_status(errc::invalid_argument, options.busybox.string()
                                                 + " is dynamically linked; install the "
                                                   "busybox-static package or point "
                                                   "template_options.busybox at a static busybox");
  return copy_executable(options.busybox, dir / "bin" / "busybox");
}

// Links every applet (`busybox --list-full`: "usr/bin/awk", ...) to /bin/busybox.
result<int> link_applets(const std::filesystem::path& dir, const template_options& options) {
  std::vector<std::string> applets;
  command_options run;
  run.timeout_ms = 10'000;
  run.on_line = [&applets](std::string_view line) {
    if (!line.empty())
      applets.emplace_back(line);
  };
  if (auto listed =
        run_checked("listing busybox applets", {options.busybox.string(), "--list-full"}, run);
      !listed)
    return listed;
  int linked = 0;
  for (const auto& applet : applets) {
    std::filesystem::path relative(applet);
    if (relative.is_absolute() || applet.find("..") != std::string::npos
        || relative.filename() == "busybox")
      continue;
    if (auto made = make_dirs((dir / relative).parent_path()); !made)
      return made;
    if (::symlink("/bin/busybox", (dir / relative).c_str()) != 0 && errno != EEXIST)
      return errno_status("cannot link applet " + applet);
    ++linked;
  }
  if (linked == 0)
    return make_status(errc::io_error, options.busybox.string() + " --list-full listed no applets");
  return linked;
}

status write_minimal_files(const std::filesystem::path& dir) {
  struct directory {
    const char* path;
    mode_t mode;
  };
  for (auto [path, mode] :
       {directory{"etc", 0755}, directory{"root", 0700}, directory{"tmp", 01777},
        directory{"var/tmp", 01777}, directory{"proc", 0555}, directory{"sys", 0555},
        directory{"dev", 0755}, directory{"run", 0755}, directory{"home", 0755}}) {
    if (auto made = make_dirs(dir / path, mode); !made)
      return made;
    // mkdir applies the umask; the sticky world-writable bits must be exact.
    if (::chmod((dir / path).c_str(), mode) != 0)
      return errno_status("cannot set the mode of " + (dir / path).string());
  }
  struct file {
    const char* path;
    const char* contents;
  };
  for (auto [path, contents] :
       {file{"etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
                           "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
        file{"etc/group", "root:x:0:\nnobody:x:65534:\n"}, file{"etc/hostname", "airlock\n"},
        file{"etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n"}})
    if (auto written = write_file(dir / path, contents); !written)
      return written;
  return status::ok();
}

std::string iso_time(int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string join(const std::vector<std::string>& items, char separator) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : std::string(1, separator)) + item;
  return out;
}

// debootstrap leaves the .deb files it installed (about 60 MB for base) in
// apt's cache; every sandbox would carry them. Same as `apt-get clean`.
status remove_downloaded_packages(const std::filesystem::path& dir) {
  auto archives = dir / "var" / "cache" / "apt" / "archives";
  auto names = list_dir(archives);
  if (!names)
    return names.code() == errc::not_found ? status::ok() : names.error();
  for (const auto& name : *names)
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".deb") == 0
        && ::unlink((archives / name).c_str()) != 0)
      return errno_status("cannot delete " + (archives / name).string());
  return status::ok();
}

/// The end of base's source text: what makes one base differ from another
/// built from the same mirror (the packages, the account). A cached base
/// whose source does not end with it is built again.
std::string base_recipe(const template_options& options) {
  return "+" + join(options.base_packages, ',') + " +" + describe_account(options.base_user);
}

std::string describe_source(std::string_view name, const template_options& options) {
  if (name == "minimal")
    return "busybox " + options.busybox.string();
  return "debootstrap --variant=minbase " + options.suite + " " + options.mirror + " "
         + base_recipe(options);
}

} // namespace

// ---- manifest ---------------------------------------------------------------

std::string manifest_to_json(const template_manifest& manifest) {
  nlohmann::json json = {
    {"format_version", manifest.format_version},
    {"name", manifest.name},
    {"created_unix_s", manifest.created_unix_s},
    {"created", iso_time(manifest.created_unix_s)},
    {"size_bytes", manifest.size_bytes},
    {"files", manifest.files},
    {"source", manifest.source},
  };
  if (!manifest.start_cmd.empty())
    json["start_cmd"] = manifest.start_cmd;
  if (!manifest.ready_cmd.empty())
    json["ready_cmd"] = manifest.ready_cmd;
  if (!manifest.env.empty())
    json["env"] = manifest.env;
  if (!manifest.workdir.empty())
    json["workdir"] = manifest.workdir;
  if (!manifest.user.empty())
    json["user"] = manifest.user;
  if (!manifest.digest.empty())
    json["digest"] = manifest.digest;
  return json.dump(2) + "\n";
}

result<template_manifest> parse_manifest(std::string_view text) {
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    return make_status(errc::corrupt_record, "template manifest is not a JSON object");
  auto has = [&json](const char* key, bool (nlohmann::json::*is)() const noexcept) {
    return json.contains(key) && (json[key].*is)();
  };
  if (!has("format_version", &nlohmann::json::is_number_unsigned))
    return make_status(errc::corrupt_record, "template manifest has no format_version");
  template_manifest out;
  out.format_version = json["format_version"].get<uint32_t>();
  if (out.format_version > manifest_format_version)
    return make_status(errc::unsupported_version,
                       "template manifest format " + std::to_string(out.format_version)
                         + " is newer than this airlock understands; rebuild the template");
  if (!has("name", &nlohmann::json::is_string)
      || !has("created_unix_s", &nlohmann::json::is_number_integer)
      || !has("size_bytes", &nlohmann::json::is_number_unsigned)
      || !has("source", &nlohmann::json::is_string))
    return make_status(errc::corrupt_record,
                       "template manifest lacks name, created_unix_s, size_bytes or source");
  out.name = json["name"].get<std::string>();
  out.created_unix_s = json["created_unix_s"].get<int64_t>();
  out.size_bytes = json["size_bytes"].get<uint64_t>();
  out.source = json["source"].get<std::string>();
  if (has("files", &nlohmann::json::is_number_unsigned))
    out.files = json["files"].get<uint64_t>();
  if (has("start_cmd", &nlohmann::json::is_string))
    out.start_cmd = json["start_cmd"].get<std::string>();
  if (json.contains("env") && json["env"].is_array())
    for (const auto& item : json["env"])
      if (item.is_string())
        out.env.push_back(item.get<std::string>());
  for (auto [key, field] :
       {std::pair{"ready_cmd", &out.ready_cmd}, std::pair{"workdir", &out.workdir},
        std::pair{"user", &out.user}, std::pair{"digest", &out.digest}})
    if (has(key, &nlohmann::json::is_string))
      *field = json[key].get<std::string>();
  return out;
}

std::filesystem::path manifest_path(const std::filesystem::path& templates_dir,
                                    std::string_view name) {
  return templates_dir / (std::string(name) + ".manifest.json");
}

// ---- debootstrap progress ---------------------------------------------------

void debootstrap_progress::enter(std::string_view phase, int low) {
  phase_ = phase;
  percent_ = std::max(percent_, low);
}

void debootstrap_progress::advance(int low, int high, uint32_t done, uint32_t total) {
  total = std::max<uint32_t>(total, 1);
  int at = low + static_cast<int>(int64_t{high - low} * std::min(done, total) / total);
  percent_ = std::max(percent_, at);
}

debootstrap_progress::report debootstrap_progress::feed(std::string_view line) {
  if (!starts_with(line, "I: "))
    return {phase_, percent_};
  auto message = line.substr(3);
  // The word after the verb: "Retrieving adduser 3.134" -> "adduser".
  auto after_verb = message.substr(std::min(message.find(' '), message.size() - 1) + 1);
  auto object = after_verb.substr(0, after_verb.find(' '));
  // Index files come before packages; they are the "resolve" phase.
  auto is_index = [](std::string_view name) {
    return name == "InRelease" || name == "Release" || name == "Release.gpg" || name == "Packages";
  };
  // Unpacking and configuring alternate (required, then base packages): one
  // range for both keeps the percentage monotonic.
  uint32_t installed_total = 2 * std::max<uint32_t>(retrieved_, 1);
  if (starts_with(message, "Retrieving ") || starts_with(message, "Validating ")) {
    if (is_index(object)) {
      enter("resolve", 1);
    } else if (starts_with(message, "Retrieving ")) {
      enter("download", 5);
      ++retrieved_;
      advance(5, 45, retrieved_, std::max(expected_packages_, retrieved_ + 1));
    }
  } else if (starts_with(message, "Checking") || starts_with(message, "Valid Release")
             || starts_with(message, "Resolving") || starts_with(message, "Found")) {
    enter("resolve", std::min(percent_ + 1, 5));
  } else if (starts_with(message, "Chosen extractor") || starts_with(message, "Extracting ")) {
    enter("extract", 45);
    if (starts_with(message, "Extracting "))
      advance(45, 55, ++extracted_, retrieved_);
  } else if (starts_with(message, "Installing") || starts_with(message, "Unpacking")) {
    enter("unpack", 55);
    if (starts_with(message, "Unpacking ") && !starts_with(message, "Unpacking required")
        && !starts_with(message, "Unpacking the base"))
      ++unpacked_;
    advance(55, 97, unpacked_ + configured_, installed_total);
  } else if (starts_with(message, "Configuring")) {
    enter("configure", 55);
    if (!starts_with(message, "Configuring required")
        && !starts_with(message, "Configuring the base"))
      ++configured_;
    advance(55, 97, unpacked_ + configured_, installed_total);
  } else if (starts_with(message, "Base system installed")) {
    enter("installed", 98);
  }
  return {phase_, percent_};
}

// ---- minimal ----------------------------------------------------------------

status populate_minimal(const std::filesystem::path& dir, const template_options& options,
                        const build_control& control) {
  report(control, "busybox", 5);
  for (const char* sub : {"bin", "sbin", "usr/bin", "usr/sbin"})
    if (auto made = make_dirs(dir / sub); !made)
      return made;
  if (auto copied = install_busybox(dir, options); !copied)
    return copied;
  report(control, "applets", 30);
  auto linked = link_applets(dir, options);
  if (!linked)
    return linked.error();
  report(control, "applets", 60, std::to_string(*linked) + " applets linked");
  if (auto cancelled = check_cancel(control); !cancelled)
    return cancelled;
  if (auto written = write_minimal_files(dir); !written)
    return written;
  return status::ok();
}

// ---- base -------------------------------------------------------------------

status probe_mirror(std::string_view mirror, std::string_view suite, uint32_t timeout_ms) {
  if (starts_with(mirror, "file:"))
    return status::ok();
  std::string url = std::string(mirror);
  if (url.empty() || url.back() != '/')
    url += '/';
  url += "dists/" + std::string(suite) + "/InRelease";
  command_options run;
  run.timeout_ms = timeout_ms + 2'000;
  auto seconds = std::to_string(std::max<uint32_t>(1, timeout_ms / 1000));
  auto probed = run_command({"wget", "-q", "--spider", "-T", seconds, "-t", "1", url}, run);
  if (!probed && probed.code() == errc::not_found)
    return status::ok(); // no wget to ask; debootstrap will tell
  if (probed && probed->succeeded())
    return status::ok();
  std::string why =
    probed ? "wget exited with " + std::to_string(probed->exit_code) : probed.error().message;
  return make_status(errc::unavailable, "the Debian mirror " + std::string(mirror)
                                          + " does not answer for " + url + " (" + why
                                          + "); check the network or proxy, or set "
                                            "template_options.mirror");
}

/// debootstrap creates device nodes in the target and refuses a nodev mount,
/// and the btrfs image is mounted nodev. For the build only, the staging tree
/// is bind-mounted onto itself with devices allowed; sandboxes still see it
/// through the nodev mount.
class build_mount {
public:
  explicit build_mount(const std::filesystem::path& dir) : dir_(dir) {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0 || (fs.f_flag & ST_NODEV) == 0)
      return;
    if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      failure_ = errno_status("bind-mount " + dir.string() + " for the template build");
      return;
    }
    mounted_ = true;
    if (::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID, nullptr) != 0)
      failure_ = errno_status("allow devices on " + dir.string() + " for debootstrap");
  }
  ~build_mount() {
    if (mounted_)
      (void)::umount2(dir_.c_str(), MNT_DETACH);
  }
  build_mount(const build_mount&) = delete;
  build_mount& operator=(const build_mount&) = delete;
  const status& failure() const { return failure_; }

private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  status failure_ = status::ok();
};

status populate_base(const std::filesystem::path& dir, const template_options& options,
                     const build_control& control) {
  build_mount devices_allowed(dir);
  if (!devices_allowed.failure())
    return devices_allowed.failure();
  std::string mirror = options.mirror;
  if (mirror.empty()) {
    auto found = find_host_mirror(options.apt_dir, options.suite);
    if (!found)
      return found.error();
    mirror = *found;
  }
  report(control, "probe", 0, mirror);
  if (auto reachable = probe_mirror(mirror, options.suite, options.mirror_probe_timeout_ms);
      !reachable)
    return reachable;
  debootstrap_progress parser;
  command_options run;
  run.timeout_ms = options.debootstrap_timeout_ms;
  run.cancel = control.cancel;
  run.env = {"LC_ALL=C", "DEBIAN_FRONTEND=noninteractive",
             "PATH=" + std::string(default_command_path)};
  run.on_line = [&parser, &control](std::string_view line) {
    auto now = parser.feed(line);
    report(control, now.phase, now.percent, line);
  };
  std::vector<std::string> argv{options.debootstrap, "--variant=minbase"};
  if (!options.base_packages.empty())
    argv.push_back("--include=" + join(options.base_packages, ','));
  argv.insert(argv.end(), {options.suite, dir.string(), mirror});
  auto bootstrapped = run_checked("debootstrap of " + options.suite + " from " + mirror, argv, run);
  // debootstrap mounts /proc and /sys inside; a killed run leaves them there.
  auto unmounted = unmount_below(dir);
  if (!bootstrapped)
    return bootstrapped;
  if (!unmounted)
    return unmounted;
  if (auto written = write_file(dir / "etc" / "hostname", "airlock\n"); !written)
    return written;
  if (auto cleaned = remove_downloaded_packages(dir); !cleaned)
    return cleaned;
  return status::ok();
}

// ---- builder ----------------------------------------------------------------

bool template_builder::is_known(std::string_view name) noexcept {
  return name == "minimal" || name == "base";
}

result<template_manifest> template_builder::manifest(std::string_view name) const {
  if (!driver_.has_template(name))
    return make_status(errc::not_found, "template '" + std::string(name) + "' is not built");
  auto text = read_file(manifest_path(driver_.templates_dir(), name));
  if (!text)
    return text.error();
  auto parsed = parse_manifest(*text);
  if (parsed && parsed->name != name)
    return make_status(errc::corrupt_record, "the manifest of template '" + std::string(name)
                                               + "' names '" + parsed->name + "'");
  return parsed;
}

result<template_manifest> template_builder::ensure(std::string_view name,
                                                   const build_control& control) {
  if (!is_known(name))
    return make_status(errc::invalid_argument,
                       "unknown template '" + std::string(name) + "'; known: minimal, base");
  if (driver_.has_template(name)) {
    auto cached = manifest(name);
    // A base built with another package list or account (an older
    // airlock's) is built again, unless sandboxes still stand on it
    // (overlay): then it serves.
    const bool stale = cached && name == "base" && !cached->source.ends_with(base_recipe(options_));
    if (cached && (!stale || !driver_.delete_template(name))) {
      report(control, "cached", 100);
      return cached;
    }
    if (!cached)
      if (auto deleted = driver_.delete_template(name); !deleted)
        return deleted;
  }
  return build(name, control);
}

result<template_manifest> template_builder::rebuild(std::string_view name,
                                                    const build_control& control) {
  if (!is_known(name))
    return make_status(errc::invalid_argument,
                       "unknown template '" + std::string(name) + "'; known: minimal, base");
  if (auto deleted = driver_.delete_template(name); !deleted)
    return deleted;
  return build(name, control);
}

result<template_manifest> template_builder::build(std::string_view name,
                                                  const build_control& control) {
  template_options options = options_;
  if (name == "base" && options.mirror.empty()) {
    auto found = find_host_mirror(options.apt_dir, options.suite);
    if (!found)
      return found.error();
    options.mirror = *found;
  }
  auto dir = driver_.create_template(name);
  if (!dir)
    return dir.error();
  status built = name == "minimal" ? populate_minimal(*dir, options, control)
                                   : populate_base(*dir, options, control);
  if (built && name == "base")
    built = add_user_account(*dir, options.base_user);
  if (built)
    built = check_cancel(control);
  template_manifest manifest;
  if (built) {
    auto size = measure_tree(*dir);
    manifest.name = std::string(name);
    manifest.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    manifest.size_bytes = size ? size->apparent_bytes : 0;
    manifest.files = size ? size->files : 0;
    manifest.source = describe_source(name, options);
    report(control, "seal", 99);
    built = write_file_atomically(manifest_path(driver_.templates_dir(), name).string(),
                                  manifest_to_json(manifest), 0644);
  }
  if (built)
    built = driver_.seal_template(name);
  if (!built) {
    // No half template: the staging tree and the manifest go.
    (void)unmount_below(*dir);
    (void)driver_.delete_template(name);
    return built;
  }
  report(control, "done", 100);
  return manifest;
}

} // namespace airlock::worker
