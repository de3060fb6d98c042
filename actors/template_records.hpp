#pragma once
// The rules of template records (docs/templates.md), as functions of the
// store so that the sandbox registry, which serializes every write to
// control-plane records, runs them on its own thread: a new version takes
// the next number, a version becomes current only once ready, a version in
// use by a sandbox or checkpoint is kept, the built-in templates are records
// like any other.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/cluster_protocol.hpp" // pool_tenant
#include "schema/errc.hpp"
#include "schema/sandbox.hpp"
#include "schema/template_record.hpp"
#include "storage/kv_store.hpp"

namespace airlock::actors {

/// The templates every worker builds on first use.
inline constexpr std::string_view builtin_templates[] = {"minimal", "base"};

/// Whether `name` may name a template: 1 to 63 of [a-z0-9-], starting with a
/// letter or digit. ('_' is not allowed: a version's name on a worker is
/// "<name>_v<version>".)
bool is_valid_template_name(std::string_view name) noexcept;

/// The name of version `version` of template `name` in a worker's rootfs.
std::string worker_template_name(std::string_view name, uint32_t version);

/// Parses "name" or "name:version" (version 0: the current one).
result<std::pair<std::string, uint32_t>> parse_template_ref(std::string_view ref);

/// Fills `spec`'s template fields (name, version, the version's name and
/// worker, its env under the spec's own) from `record`, at version `pinned`
/// (0: the current one); with `take_runtime`, also the version's default
/// runtime. not_found for a pinned version it lacks, wrong_state for no
/// ready version or a version that is not ready.
status choose_template_version(const schema::template_record& record, uint32_t pinned,
                               schema::sandbox_spec& spec, bool take_runtime = false);

/// Sets the warm pool of template `name` as `tenant` (its owner; "" an
/// admin). A shared template's pool is an admin's to set: permission_denied
/// otherwise. not_found for a template the tenant does not see.
result<schema::template_record> set_template_pool(storage::kv_store& store, const std::string& name,
                                                  const std::string& tenant,
                                                  const schema::pool_settings& pool,
                                                  int64_t now_ms);

/// Stores the built-in templates' records when absent.
status seed_builtin_templates(storage::kv_store& store, int64_t now_ms);

/// Marks failed every version still `building` without a build operation:
/// its upload was cut short by a control-plane stop (uploads live in the
/// stopped process), so nothing will ever finish it. Run at start.
status fail_interrupted_uploads(storage::kv_store& store, int64_t now_ms);

/// The record of `name` as tenant `tenant` sees it (its own and shared ones;
/// tenant "" sees all). not_found otherwise.
result<schema::template_record> get_template(storage::kv_store& store, const std::string& name,
                                             const std::string& tenant);

/// Templates `tenant` sees, by name, at most `limit`.
result<std::vector<schema::template_record>>
list_templates(storage::kv_store& store, const std::string& tenant, size_t limit);

/// Adds `draft` as the next version of template `name`, creating the record
/// for `tenant` when there is none. A template of another tenant is
/// not_found; a shared one takes new versions only from an admin (tenant
/// ""): permission_denied otherwise. Returns the record; the new version is
/// its last.
result<schema::template_record>
add_template_version(storage::kv_store& store, const std::string& name, const std::string& tenant,
                     schema::template_version draft, int64_t now_ms);

/// Replaces version `version.version` of `name`; a ready version newer than
/// the current one becomes current.
result<schema::template_record> save_template_version(storage::kv_store& store,
                                                      const std::string& name,
                                                      const schema::template_version& version,
                                                      int64_t now_ms);

/// Ids of sandboxes (not destroyed) and snapshots that use version `version`
/// of `name` (0: any version), at most `limit`.
result<std::vector<std::string>> template_users(storage::kv_store& store, const std::string& name,
                                                uint32_t version, size_t limit);

/// Forgets version `version` of `name` (0: every version, and the record).
/// The current version moves to the newest ready one left.
status forget_template_version(storage::kv_store& store, const std::string& name, uint32_t version,
                               int64_t now_ms);

} // namespace airlock::actors
