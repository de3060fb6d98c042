// The manifests, indexes and configs of OCI image layouts and docker save archives.
#include "worker/rootfs/image_archive.hpp"

#include <algorithm>

namespace airlock::worker::image_detail {

// "a/c" for "a/b/../c"; nullopt when ".." climbs above the top. Lexical:
// member symlinks are resolved by the table, never on disk.
std::optional<std::string> lexical_normal(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    auto slash = path.find('/', start);
    auto end = slash == std::string_view::npos ? path.size() : slash;
    auto part = path.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (parts.empty())
        return std::nullopt;
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto part : parts)
    out = join_path(out, part);
  return out;
}

namespace {

// ---- image metadata

// nlohmann's checked accessors: a field of the wrong type is the upload's
// fault, never an exception.
const json* field(const json& object, const char* key) {
  if (!object.is_object())
    return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

result<std::string> string_field(const json& object, const char* key, std::string_view shown) {
  const json* value = field(object, key);
  if (value == nullptr)
    return std::string();
  if (!value->is_string())
    return make_status(errc::invalid_argument,
                       std::string(shown) + ": \"" + key + "\" is not a string");
  return value->get<std::string>();
}

result<std::vector<std::string>> strings_field(const json& object, const char* key,
                                               std::string_view shown) {
  std::vector<std::string> out;
  const json* value = field(object, key);
  if (value == nullptr)
    return out;
  if (!value->is_array())
    return make_status(errc::invalid_argument,
                       std::string(shown) + ": \"" + key + "\" is not an array of strings");
  for (const auto& item : *value) {
    if (!item.is_string())
      return make_status(errc::invalid_argument,
                         std::string(shown) + ": \"" + key + "\" is not an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// The hex of a "sha256:<hex>" digest.
result<std::string> sha256_of_digest(std::string_view digest, std::string_view shown) {
  constexpr std::string_view prefix = "sha256:";
  if (digest.starts_with(prefix) && is_sha256_hex(digest.substr(prefix.size())))
    return std::string(digest.substr(prefix.size()));
  return make_status(errc::invalid_argument,
                     std::string(shown) + " has digest " + printable(digest)
                       + "; only sha256:<64 lowercase hex digits> is supported");
}

struct descriptor {
  std::string media_type;
  std::string digest; ///< "sha256:<hex>"
  std::string hex;
  int64_t size = -1;     ///< -1: not given
  std::string platform;  ///< "os/architecture" or empty
  bool metadata = false; ///< an attestation or other non-image manifest
};

result<descriptor> parse_descriptor(const json& value, std::string_view shown) {
  if (!value.is_object())
    return make_status(errc::invalid_argument, std::string(shown) + " is not a descriptor");
  descriptor out;
  auto media_type = string_field(value, "mediaType", shown);
  auto digest = string_field(value, "digest", shown);
  if (!media_type || !digest)
    return !media_type ? media_type.error() : digest.error();
  out.media_type = *media_type;
  out.digest = *digest;
  auto hex = sha256_of_digest(out.digest, shown);
  if (!hex)
    return hex.error();
  out.hex = *hex;
  if (const json* size = field(value, "size"); size != nullptr && size->is_number_integer())
    out.size = size->get<int64_t>();
  if (const json* platform = field(value, "platform")) {
    auto os = string_field(*platform, "os", shown);
    auto architecture = string_field(*platform, "architecture", shown);
    if (os && architecture && !os->empty())
      out.platform = *os + "/" + *architecture;
    out.metadata = os && *os == "unknown"; // buildx attestations: unknown/unknown
  }
  if (const json* annotations = field(value, "annotations")) {
    auto kind = string_field(*annotations, "vnd.docker.reference.type", shown);
    out.metadata = out.metadata || (kind && !kind->empty());
  }
  return out;
}

status verify_blob(const staged_file& file, const descriptor& wanted, std::string_view shown) {
  if (file.sha256 != wanted.hex)
    return make_status(errc::invalid_argument, std::string(shown) + " does not match its digest "
                                                 + wanted.digest
                                                 + ": its content hashes to sha256:" + file.sha256
                                                 + "; the archive is corrupt or was altered");
  if (wanted.size >= 0 && file.size != static_cast<uint64_t>(wanted.size))
    return make_status(errc::invalid_argument,
                       std::string(shown) + " is " + std::to_string(file.size)
                         + " bytes but its descriptor says " + std::to_string(wanted.size));
  return status::ok();
}

result<const staged_file*> oci_blob(const outer_archive& outer, const descriptor& wanted,
                                    const std::string& shown) {
  auto file = outer.find("blobs/sha256/" + wanted.hex, shown);
  if (!file)
    return file.error();
  if (auto verified = verify_blob(**file, wanted, shown); !verified)
    return verified;
  return *file;
}

// The manifest for this host among an index's: the linux/<host architecture>
// one, else the first without a platform.
result<descriptor> choose_manifest(const json& index, std::string_view shown) {
  const json* list = field(index, "manifests");
  if (list == nullptr || !list->is_array() || list->empty())
    return make_status(errc::invalid_argument, std::string(shown) + " lists no manifests");
  std::vector<descriptor> images;
  for (const auto& item : *list) {
    auto parsed = parse_descriptor(item, std::string(shown) + " manifest");
    if (!parsed)
      return parsed.error();
    if (!parsed->metadata)
      images.push_back(std::move(*parsed));
  }
  auto wanted = "linux/" + std::string(host_architecture());
  for (const auto& image : images)
    if (image.platform == wanted)
      return image;
  std::string found;
  for (const auto& image : images) {
    if (image.platform.empty())
      return image;
    found += (found.empty() ? "" : ", ") + image.platform;
  }
  return make_status(errc::invalid_argument,
                     std::string(shown) + " has no " + wanted + " image (it has: " + found + ")");
}

struct chosen_manifest {
  descriptor manifest;
  json document;
};

// index.json, then through nested indexes to the manifest for this host.
result<chosen_manifest> find_manifest(const outer_archive& outer) {
  if (!outer.find("oci-layout", "the OCI image layout"))
    return make_status(errc::invalid_argument,
                       "the archive has no oci-layout file: it is not an OCI image layout "
                       "(for the output of docker save, use format docker)");
  auto index_file = outer.find("index.json", "the OCI image layout");
  if (!index_file)
    return index_file.error();
  auto document = outer.read_json(**index_file, "index.json");
  std::string shown = "index.json";
  for (int depth = 0; depth < index_depth_max; ++depth) {
    if (!document)
      return document.error();
    auto chosen = choose_manifest(*document, shown);
    if (!chosen)
      return chosen.error();
    shown = "manifest " + chosen->digest;
    auto blob = oci_blob(outer, *chosen, shown);
    if (!blob)
      return blob.error();
    document = outer.read_json(**blob, shown);
    if (document && field(*document, "manifests") == nullptr)
      return chosen_manifest{std::move(*chosen), std::move(*document)};
  }
  if (!document)
    return document.error();
  return make_status(errc::invalid_argument, "image indexes are nested more than "
                                               + std::to_string(index_depth_max) + " deep");
}

} // namespace

result<image_plan> plan_oci(const outer_archive& outer) {
  auto chosen = find_manifest(outer);
  if (!chosen)
    return chosen.error();
  const json& manifest = chosen->document;
  auto shown = "manifest " + chosen->manifest.digest;
  const json* config_field = field(manifest, "config");
  auto config =
    parse_descriptor(config_field != nullptr ? *config_field : json(), shown + " config");
  if (!config)
    return config.error();
  auto config_blob = oci_blob(outer, *config, "config " + config->digest);
  if (!config_blob)
    return config_blob.error();
  auto config_json = outer.read_json(**config_blob, "config " + config->digest);
  if (!config_json)
    return config_json.error();
  image_plan plan;
  plan.digest = chosen->manifest.digest;
  plan.config = std::move(*config_json);
  const json* layers = field(manifest, "layers");
  if (layers == nullptr || !layers->is_array())
    return make_status(errc::invalid_argument, shown + " has no layers array");
  for (const auto& item : *layers) {
    auto layer = parse_descriptor(item, shown + " layer");
    if (!layer)
      return layer.error();
    auto name = "layer " + layer->digest;
    if (!layer->media_type.empty() && layer->media_type.find("tar") == std::string::npos)
      return make_status(errc::invalid_argument, name + " has media type "
                                                   + printable(layer->media_type)
                                                   + ", which is not a tar layer");
    auto blob = oci_blob(outer, *layer, name);
    if (!blob)
      return blob.error();
    plan.layers.push_back(*blob);
    plan.layer_names.push_back(std::move(name));
  }
  return plan;
}

namespace {

// The digest a docker save member's name carries: blobs/sha256/<hex> (docker
// 25 and later) or <hex>.json (the config, before). <id>/layer.tar carries
// none: the layer is checked against the config's diff_ids instead.
std::optional<std::string> digest_in_name(std::string_view member) {
  auto path = lexical_normal(member).value_or("");
  constexpr std::string_view blobs = "blobs/sha256/";
  if (path.starts_with(blobs) && is_sha256_hex(path.substr(blobs.size())))
    return path.substr(blobs.size());
  if (path.size() == 64 + 5 && path.ends_with(".json") && is_sha256_hex(path.substr(0, 64)))
    return path.substr(0, 64);
  return std::nullopt;
}

// The sha256 of a file's decompressed content (libarchive's raw format).
result<std::string> content_sha256(const staged_file& file, const archive_limits& limits,
                                   std::string_view shown) {
  file_source source;
  if (auto opened = source.open(file.path); !opened)
    return opened;
  auto a = new_reader(true);
  if (auto attached = source.attach(a.get()); !attached)
    return in_context(shown, attached);
  archive_entry* entry = nullptr;
  if (int r = archive_read_next_header(a.get(), &entry); r != ARCHIVE_OK && r != ARCHIVE_WARN)
    return in_context(shown, source.failure(a.get()));
  sha256 hash;
  std::vector<char> buffer(read_buffer_bytes);
  uint64_t total = 0;
  for (;;) {
    auto n = archive_read_data(a.get(), buffer.data(), buffer.size());
    if (n < 0)
      return in_context(shown, source.failure(a.get()));
    if (n == 0)
      return hash.hex();
    total += static_cast<uint64_t>(n);
    if (total > limits.uncompressed_bytes_max)
      return limit_hit(std::string(shown) + " decompresses to more than "
                         + std::to_string(limits.uncompressed_bytes_max) + " bytes",
                       "uncompressed_bytes_max", limits.uncompressed_bytes_max,
                       "raise the limit or make the image smaller");
    hash.update(buffer.data(), static_cast<size_t>(n));
  }
}

// A layer's diff_id is the sha256 of its uncompressed tar; docker save
// writes layers uncompressed, so the staged digest usually answers.
status verify_diff_id(const staged_file& file, const json& diff_id, const archive_limits& limits,
                      const std::string& shown) {
  auto hex = sha256_of_digest(diff_id.is_string() ? diff_id.get<std::string>() : std::string(),
                              shown + " diff_id");
  if (!hex)
    return hex.error();
  if (file.sha256 == *hex)
    return status::ok();
  auto content = content_sha256(file, limits, shown);
  if (!content)
    return content.error();
  if (*content != *hex)
    return make_status(errc::invalid_argument, shown + " does not match its diff_id sha256:" + *hex
                                                 + ": its content hashes to sha256:" + *content
                                                 + "; the archive is corrupt or was altered");
  return status::ok();
}

result<const staged_file*> docker_member(const outer_archive& outer, const json& name,
                                         const std::string& shown) {
  if (!name.is_string())
    return make_status(errc::invalid_argument, "manifest.json: " + shown + " is not a string");
  auto member = name.get<std::string>();
  auto file = outer.find(member, "manifest.json");
  if (!file)
    return file.error();
  if (auto hex = digest_in_name(member)) {
    descriptor wanted;
    wanted.hex = *hex;
    wanted.digest = "sha256:" + *hex;
    if (auto verified = verify_blob(**file, wanted, shown + " " + printable(member)); !verified)
      return verified;
  }
  return *file;
}

} // namespace

result<image_plan> plan_docker(const outer_archive& outer, const archive_limits& limits) {
  auto manifest_file = outer.find("manifest.json", "docker save");
  if (!manifest_file)
    return make_status(errc::invalid_argument,
                       "the archive has no manifest.json: it is not the output of docker save "
                       "(for an OCI image layout, use format oci)");
  auto manifest = outer.read_json(**manifest_file, "manifest.json");
  if (!manifest)
    return manifest.error();
  if (!manifest->is_array() || manifest->empty() || !(*manifest)[0].is_object())
    return make_status(errc::invalid_argument, "manifest.json lists no image");
  const json& image = (*manifest)[0]; // docker save of several images: the first
  const json* config_name = field(image, "Config");
  const json* layers = field(image, "Layers");
  if (config_name == nullptr || layers == nullptr || !layers->is_array())
    return make_status(errc::invalid_argument, "manifest.json: the image has no Config or Layers");
  auto config_file = docker_member(outer, *config_name, "Config");
  if (!config_file)
    return config_file.error();
  image_plan plan;
  auto config = outer.read_json(**config_file, "the image config");
  if (!config)
    return config.error();
  plan.config = std::move(*config);
  plan.digest = "sha256:" + (*config_file)->sha256; // the image ID
  const json* rootfs = field(plan.config, "rootfs");
  const json* diff_ids = rootfs != nullptr ? field(*rootfs, "diff_ids") : nullptr;
  if (diff_ids != nullptr && (!diff_ids->is_array() || diff_ids->size() != layers->size()))
    return make_status(errc::invalid_argument,
                       "the image config's rootfs.diff_ids do not match manifest.json's Layers");
  for (size_t i = 0; i < layers->size(); ++i) {
    auto shown = "layer " + std::to_string(i + 1);
    auto file = docker_member(outer, (*layers)[i], shown);
    if (!file)
      return file.error();
    if (diff_ids != nullptr && !digest_in_name((*layers)[i].get<std::string>()))
      if (auto verified = verify_diff_id(**file, (*diff_ids)[i], limits, shown); !verified)
        return verified;
    plan.layers.push_back(*file);
    plan.layer_names.push_back(shown + " " + printable((*layers)[i].get<std::string>()));
  }
  return plan;
}

status read_config(const json& document, image_config& out) {
  const json* config = field(document, "config");
  if (config == nullptr)
    return status::ok();
  constexpr std::string_view shown = "the image config";
  auto env = strings_field(*config, "Env", shown);
  if (!env)
    return env.error();
  auto entrypoint = strings_field(*config, "Entrypoint", shown);
  if (!entrypoint)
    return entrypoint.error();
  auto cmd = strings_field(*config, "Cmd", shown);
  if (!cmd)
    return cmd.error();
  auto working_dir = string_field(*config, "WorkingDir", shown);
  if (!working_dir)
    return working_dir.error();
  auto user = string_field(*config, "User", shown);
  if (!user)
    return user.error();
  out.env = std::move(*env);
  out.entrypoint = std::move(*entrypoint);
  out.cmd = std::move(*cmd);
  out.working_dir = std::move(*working_dir);
  out.user = std::move(*user);
  return status::ok();
}

} // namespace airlock::worker::image_detail
