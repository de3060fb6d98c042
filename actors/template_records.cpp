#include "actors/template_records.hpp"

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "actors/runtime_choice.hpp"
#include "storage/sandbox_store.hpp"
#include "storage/template_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::actors {

namespace {

using schema::template_record;
using schema::template_version;
using schema::template_version_state;

status put(storage::kv_store& store, const template_record& record) {
  storage::write_batch batch;
  storage::template_store::stage_put(batch, record);
  return store.write(batch, storage::durability::synced);
}

result<std::optional<template_record>> find(storage::kv_store& store, const std::string& name) {
  return storage::template_store(store).get(name);
}

bool visible_to(const template_record& record, const std::string& tenant) {
  return tenant.empty() || record.tenant_id.empty() || record.tenant_id == tenant;
}

/// The newest ready version, 0 when none.
uint32_t newest_ready(const template_record& record) {
  uint32_t newest = 0;
  for (const auto& v : record.versions)
    if (v.state == template_version_state::ready)
      newest = std::max(newest, v.version);
  return newest;
}

} // namespace

bool is_valid_template_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63 || name.front() == '-')
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string worker_template_name(std::string_view name, uint32_t version) {
  return std::string(name) + "_v" + std::to_string(version);
}

result<std::pair<std::string, uint32_t>> parse_template_ref(std::string_view ref) {
  auto colon = ref.find(':');
  std::string name(ref.substr(0, colon));
  uint32_t version = 0;
  if (colon != std::string_view::npos) {
    auto digits = ref.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || version == 0)
      return make_status(errc::invalid_argument,
                         "template \"" + std::string(ref)
                           + "\" is not NAME or NAME:VERSION with a version of 1 or more");
  }
  return std::pair{std::move(name), version};
}

status seed_builtin_templates(storage::kv_store& store, int64_t now_ms) {
  for (auto name : builtin_templates) {
    auto found = find(store, std::string(name));
    if (!found)
      return found.error();
    if (found->has_value())
      continue;
    template_record record;
    record.name = std::string(name);
    record.current_version = 1;
    record.created_at_ms = record.updated_at_ms = now_ms;
    template_version v;
    v.version = 1;
    v.state = template_version_state::ready;
    v.source_json = nlohmann::json{{"builtin", std::string(name)}}.dump();
    v.default_runtime = "namespace";
    v.created_at_ms = now_ms;
    v.worker_name = std::string(name); // every worker builds it on first use
    record.versions.push_back(std::move(v));
    if (auto stored = put(store, record); !stored)
      return stored;
  }
  return status::ok();
}

status fail_interrupted_uploads(storage::kv_store& store, int64_t now_ms) {
  auto listed = list_templates(store, "", 1'000'000);
  if (!listed)
    return listed.error();
  for (auto& record : *listed) {
    bool changed = false;
    for (auto& v : record.versions) {
      if (v.state != template_version_state::building || !v.operation_id.empty())
        continue;
      v.state = template_version_state::failed;
      v.error =
        schema::error_info{"cancelled", "the upload was cut short by a control-plane restart; "
                                        "upload the image again"};
      changed = true;
    }
    if (!changed)
      continue;
    record.updated_at_ms = now_ms;
    if (auto stored = put(store, record); !stored)
      return stored;
  }
  return status::ok();
}

status choose_template_version(const template_record& record, uint32_t pinned,
                               schema::sandbox_spec& spec, bool take_runtime) {
  const uint32_t version = pinned != 0 ? pinned : record.current_version;
  const auto* chosen = record.find(version);
  if (pinned != 0 && chosen == nullptr)
    return make_status(errc::not_found,
                       "template " + record.name + " has no version " + std::to_string(pinned));
  if (chosen == nullptr)
    return make_status(errc::wrong_state, "template " + record.name
                                            + " has no ready version yet: wait for its build "
                                              "to succeed");
  if (chosen->state != template_version_state::ready)
    return make_status(errc::wrong_state,
                       "template " + record.name + " version " + std::to_string(version) + " is "
                         + std::string(schema::to_string(chosen->state)) + ": use a ready version");
  spec.template_name = record.name;
  spec.template_version = version;
  spec.template_worker_name = chosen->worker_name;
  spec.template_worker_id = chosen->worker_id;
  for (const auto& [key, value] : chosen->env)
    spec.env.emplace(key, value); // the spec's own value wins
  if (take_runtime && is_runtime_name(chosen->default_runtime))
    set_runtime(spec, chosen->default_runtime);
  return status::ok();
}

result<template_record> set_template_pool(storage::kv_store& store, const std::string& name,
                                          const std::string& tenant,
                                          const schema::pool_settings& pool, int64_t now_ms) {
  auto found = get_template(store, name, tenant);
  if (!found)
    return found.error();
  if (found->tenant_id.empty() && !tenant.empty())
    return make_status(errc::permission_denied,
                       "template " + name
                         + " is shared by every tenant: only an admin key sets its pool");
  found->pool = pool;
  found->updated_at_ms = now_ms;
  if (auto stored = put(store, *found); !stored)
    return stored;
  return std::move(*found);
}

result<template_record> get_template(storage::kv_store& store, const std::string& name,
                                     const std::string& tenant) {
  auto found = find(store, name);
  if (!found)
    return found.error();
  if (!found->has_value() || !visible_to(**found, tenant))
    return make_status(errc::not_found, "no template " + name);
  return std::move(**found);
}

result<std::vector<template_record>> list_templates(storage::kv_store& store,
                                                    const std::string& tenant, size_t limit) {
  auto listed = storage::template_store(store).list(tenant, limit, {});
  if (!listed)
    return listed.error();
  return std::move(listed->items);
}

result<template_record> add_template_version(storage::kv_store& store, const std::string& name,
                                             const std::string& tenant, template_version draft,
                                             int64_t now_ms) {
  auto found = find(store, name);
  if (!found)
    return found.error();
  template_record record;
  if (found->has_value()) {
    record = std::move(**found);
    if (!visible_to(record, tenant))
      return make_status(errc::not_found, "no template " + name);
    if (record.tenant_id.empty() && !tenant.empty())
      return make_status(errc::permission_denied,
                         "template " + name
                           + " is shared by every tenant: only an admin key adds versions to it; "
                             "build your own under another name");
  } else {
    record.name = name;
    record.tenant_id = tenant;
    record.created_at_ms = now_ms;
  }
  draft.version = record.next_version();
  draft.created_at_ms = now_ms;
  draft.worker_name = worker_template_name(name, draft.version);
  record.versions.push_back(std::move(draft));
  record.updated_at_ms = now_ms;
  if (auto stored = put(store, record); !stored)
    return stored;
  return record;
}

result<template_record> save_template_version(storage::kv_store& store, const std::string& name,
                                              const template_version& version, int64_t now_ms) {
  auto found = find(store, name);
  if (!found)
    return found.error();
  if (!found->has_value())
    return make_status(errc::not_found, "no template " + name);
  auto record = std::move(**found);
  auto* slot = record.find(version.version);
  if (slot == nullptr)
    return make_status(errc::not_found,
                       "template " + name + " has no version " + std::to_string(version.version));
  *slot = version;
  if (version.state == template_version_state::ready && version.version > record.current_version)
    record.current_version = version.version;
  record.updated_at_ms = now_ms;
  if (auto stored = put(store, record); !stored)
    return stored;
  return record;
}

result<std::vector<std::string>> template_users(storage::kv_store& store, const std::string& name,
                                                uint32_t version, size_t limit) {
  std::vector<std::string> users;
  auto uses = [&](const std::string& template_name, uint32_t used_version) {
    return template_name == name && (version == 0 || used_version == version);
  };
  std::string cursor;
  do {
    auto page = storage::sandbox_store(store).list({}, 1000, cursor);
    if (!page)
      return page.error();
    for (const auto& sandbox : page->items)
      if (sandbox.state != schema::sandbox_state::destroyed
          && uses(sandbox.spec.template_name, sandbox.spec.template_version)
          && users.size() < limit)
        users.push_back(sandbox.id);
    cursor = page->next_cursor;
  } while (!cursor.empty() && users.size() < limit);
  auto snapshots =
    store.scan(storage::keyspace::snapshots, "", "", [&](std::string_view, std::string_view bytes) {
      auto snapshot = schema::decode_snapshot(bytes);
      if (snapshot) {
        uint32_t used = 0;
        const auto& text = snapshot->template_version;
        std::from_chars(text.data(), text.data() + text.size(), used);
        if (uses(snapshot->template_name, used) && users.size() < limit)
          users.push_back(snapshot->id);
      }
      return users.size() < limit;
    });
  if (!snapshots)
    return snapshots;
  return users;
}

status forget_template_version(storage::kv_store& store, const std::string& name, uint32_t version,
                               int64_t now_ms) {
  auto found = find(store, name);
  if (!found)
    return found.error();
  if (!found->has_value())
    return status::ok();
  auto record = std::move(**found);
  std::erase_if(record.versions, [version](const template_version& v) {
    return version == 0 || v.version == version;
  });
  storage::write_batch batch;
  if (record.versions.empty()) {
    storage::template_store::stage_erase(batch, name);
  } else {
    if (record.find(record.current_version) == nullptr)
      record.current_version = newest_ready(record);
    record.updated_at_ms = now_ms;
    storage::template_store::stage_put(batch, record);
  }
  return store.write(batch, storage::durability::synced);
}

} // namespace airlock::actors
