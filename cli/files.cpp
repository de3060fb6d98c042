// airlock cp: one file into or out of a sandbox through the files API.

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"

namespace airlock::cli {

namespace {

using nlohmann::json;

std::string files_path(const remote_path& remote, std::string_view suffix = {}) {
  return "/v1/sandboxes/" + url_encode(remote.sandbox_id) + "/files" + std::string(suffix)
         + "?path=" + url_encode(remote.path);
}

std::string base_name(std::string_view path) {
  auto slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

/// The bytes of a local file or of stdin ("-"), at most `limit`.
result<std::string> read_source(context& ctx, const std::string& source, uint64_t limit) {
  std::ostringstream bytes;
  std::ifstream file;
  std::istream* in = &ctx.io.in;
  if (source != "-") {
    file.open(source, std::ios::binary);
    if (!file)
      return make_status(errc::not_found, "cannot read " + source);
    in = &file;
  }
  std::string chunk(64 * 1024, '\0');
  uint64_t total = 0;
  while (*in) {
    in->read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    auto got = static_cast<uint64_t>(in->gcount());
    total += got;
    if (total > limit)
      return make_status(errc::too_large, source + " is larger than " + std::to_string(limit)
                                            + " bytes, the most cp uploads");
    bytes.write(chunk.data(), in->gcount());
  }
  if (in->bad())
    return make_status(errc::io_error, "cannot read " + source);
  return bytes.str();
}

int upload(context& ctx, const std::string& source, remote_path target) {
  if (target.path.ends_with("/")) {
    if (source == "-")
      return report(ctx, make_status(errc::invalid_argument,
                                     "name the file to write: ID:/dir/name, not a directory"));
    target.path += base_name(source);
  }
  std::string path = files_path(target);
  struct stat info {};
  if (source != "-" && ::stat(source.c_str(), &info) == 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", info.st_mode & 07777);
    path += std::string("&mode=") + mode;
  }
  auto answer = put_local_file(ctx, path, source);
  if (!answer)
    return report(ctx, answer.error());
  if (ctx.inv.json)
    ctx.io.out << answer->dump() << "\n";
  return 0;
}

} // namespace

result<nlohmann::json> put_local_file(context& ctx, const std::string& path,
                                      const std::string& source) {
  auto bytes = read_source(ctx, source, ctx.options.upload_bytes_max);
  if (!bytes)
    return bytes.error();
  http_request request{"PUT",
                       ctx.api.absolute(path),
                       {{"Content-Type", "application/octet-stream"}},
                       std::move(*bytes)};
  auto response = ctx.api.send(std::move(request));
  if (!response)
    return response.error();
  if (response->status < 200 || response->status >= 300)
    return api_failure(response->status, response->body);
  auto parsed = nlohmann::json::parse(response->body, nullptr, false);
  if (parsed.is_discarded())
    return make_status(errc::io_error, "the server's answer is not JSON: " + response->body);
  return parsed;
}

namespace {

/// Streams the file to `target` ("-": stdout). A local file is written
/// beside its destination and renamed when complete, so a failed copy never
/// leaves half a file under the destination's name.
int download(context& ctx, const remote_path& source, std::string target) {
  std::error_code ec;
  if (target != "-" && std::filesystem::is_directory(target, ec))
    target += "/" + base_name(source.path);
  std::string temp = target + ".airlock-partial";
  std::ofstream file;
  std::ostream* out = &ctx.io.out;
  if (target != "-") {
    file.open(temp, std::ios::binary | std::ios::trunc);
    if (!file)
      return report(ctx, make_status(errc::io_error, "cannot write " + temp));
    out = &file;
  }
  http_request request{"GET", ctx.api.absolute(files_path(source)), {}, {}};
  auto response = ctx.api.stream(std::move(request), [out](std::string_view bytes) {
    out->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(*out);
  });
  status failure = status::ok();
  if (!response)
    failure = response.error();
  else if (response->status < 200 || response->status >= 300)
    failure = api_failure(response->status, response->body);
  else if (!out->flush())
    failure = make_status(errc::io_error, "cannot write " + (target == "-" ? "stdout" : temp));
  if (target == "-")
    return failure.is_ok() ? 0 : report(ctx, failure);
  file.close();
  if (failure.is_ok() && std::rename(temp.c_str(), target.c_str()) != 0)
    failure = make_status(errc::io_error, "cannot rename " + temp + " to " + target);
  if (!failure.is_ok()) {
    std::filesystem::remove(temp, ec);
    return report(ctx, failure);
  }
  return 0;
}

} // namespace

int run_cp(context& ctx) {
  const std::string& source = ctx.inv.positionals[0];
  const std::string& target = ctx.inv.positionals[1];
  auto remote_source = parse_remote(source);
  auto remote_target = parse_remote(target);
  if (remote_source.has_value() == remote_target.has_value()) {
    ctx.io.err << "airlock: cp copies between this machine and a sandbox: exactly one of SRC "
                  "and DST must be ID:/path\n";
    return exit_usage;
  }
  const auto& remote = remote_source ? *remote_source : *remote_target;
  if (!remote.path.starts_with("/")) {
    ctx.io.err << "airlock: a sandbox path must be absolute: " << remote.sandbox_id << ":/"
               << remote.path << "\n";
    return exit_usage;
  }
  return remote_target ? upload(ctx, source, *remote_target)
                       : download(ctx, *remote_source, target);
}

} // namespace airlock::cli
