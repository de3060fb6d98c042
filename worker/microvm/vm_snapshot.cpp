#include "worker/microvm/vm_snapshot.hpp"

#include <openssl/evp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

namespace airlock::worker::microvm {
namespace {

constexpr const char* format_name = "airlock-microvm-snapshot";

/// A plain file name: no separator, not "." or "..".
bool plain_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

} // namespace

std::string to_json(const vm_snapshot_record& r) {
  nlohmann::json j = {
    {"format", format_name},
    {"format_version", r.format_version},
    {"source_id", r.source_id},
    {"created_unix_ms", r.created_unix_ms},
    {"qemu_version", r.qemu_version},
    {"machine", r.machine},
    {"accel", r.accel},
    {"cpu", r.cpu},
    {"memory_mb", r.memory_mb},
    {"vcpus", r.vcpus},
    {"kernel_sha256", r.kernel_sha256},
    {"initrd_sha256", r.initrd_sha256},
    {"guest_release", r.guest_release},
    {"network", r.network},
    {"files", {{"state", r.state_file}, {"memory", r.memory_file}, {"disk", r.disk_file}}},
  };
  return j.dump(2) + "\n";
}

result<vm_snapshot_record> vm_snapshot_record_from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", std::string()) != format_name)
    return make_status(errc::corrupt_record, "microvm: not a VM snapshot record");
  vm_snapshot_record r;
  r.format_version = j.value("format_version", 0u);
  if (r.format_version != vm_snapshot_format_version)
    return make_status(errc::unsupported_version,
                       "microvm: snapshot format version " + std::to_string(r.format_version)
                         + " (this build reads " + std::to_string(vm_snapshot_format_version)
                         + ")");
  try {
    r.source_id = j.value("source_id", std::string());
    r.created_unix_ms = j.value("created_unix_ms", int64_t{0});
    r.qemu_version = j.at("qemu_version").get<std::string>();
    r.machine = j.at("machine").get<std::string>();
    r.accel = j.at("accel").get<std::string>();
    r.cpu = j.at("cpu").get<std::string>();
    r.memory_mb = j.at("memory_mb").get<uint32_t>();
    r.vcpus = j.at("vcpus").get<uint32_t>();
    r.kernel_sha256 = j.at("kernel_sha256").get<std::string>();
    r.initrd_sha256 = j.at("initrd_sha256").get<std::string>();
    r.guest_release = j.value("guest_release", std::string());
    r.network = j.value("network", false);
    const auto& files = j.at("files");
    r.state_file = files.at("state").get<std::string>();
    r.memory_file = files.at("memory").get<std::string>();
    r.disk_file = files.at("disk").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return make_status(errc::corrupt_record, std::string("microvm: snapshot record: ") + e.what());
  }
  // No memory file: the RAM is in the state stream.
  for (const auto* name : {&r.state_file, &r.memory_file, &r.disk_file})
    if (!plain_name(*name) && !(name == &r.memory_file && name->empty()))
      return make_status(errc::invalid_argument,
                         "microvm: snapshot file '" + *name + "' is not a name in its directory");
  return r;
}

status check_restorable(const vm_snapshot_record& saved, const vm_snapshot_record& here) {
  auto differs = [](const char* what, const std::string& a, const std::string& b) {
    return make_status(errc::wrong_state, std::string("microvm: the snapshot was taken with ")
                                            + what + " '" + a + "', this host has '" + b + "'");
  };
  if (saved.qemu_version != here.qemu_version)
    return differs("QEMU", saved.qemu_version, here.qemu_version);
  if (saved.accel != here.accel)
    return differs("accelerator", saved.accel, here.accel);
  if (saved.machine != here.machine)
    return differs("machine", saved.machine, here.machine);
  if (saved.cpu != here.cpu)
    return differs("cpu", saved.cpu, here.cpu);
  if (saved.kernel_sha256 != here.kernel_sha256)
    return differs("guest kernel (sha256)", saved.kernel_sha256, here.kernel_sha256);
  if (saved.initrd_sha256 != here.initrd_sha256)
    return differs("guest initramfs (sha256)", saved.initrd_sha256, here.initrd_sha256);
  if (saved.memory_mb != here.memory_mb)
    return differs("memory (MiB)", std::to_string(saved.memory_mb), std::to_string(here.memory_mb));
  if (saved.vcpus != here.vcpus)
    return differs("vCPUs", std::to_string(saved.vcpus), std::to_string(here.vcpus));
  return status::ok();
}

status write_vm_snapshot_record(const std::string& dir, const vm_snapshot_record& record) {
  const std::string path = dir + "/" + vm_snapshot_record_name;
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << to_json(record);
    out.flush();
    if (!out)
      return make_status(errc::io_error, "microvm: write " + partial);
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0)
    return make_status(errc::io_error, "microvm: rename " + partial);
  return status::ok();
}

result<vm_snapshot_record> read_vm_snapshot_record(const std::string& dir) {
  std::ifstream in(dir + "/" + vm_snapshot_record_name);
  if (!in)
    return make_status(errc::not_found, "microvm: no snapshot record in " + dir);
  std::stringstream text;
  text << in.rdbuf();
  return vm_snapshot_record_from_json(text.str());
}

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    return "";
  std::string chunk(1 << 20, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (in.gcount() > 0)
      EVP_DigestUpdate(ctx.get(), chunk.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1)
    return "";
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

} // namespace airlock::worker::microvm
