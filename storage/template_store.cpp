#include "storage/template_store.hpp"

#include "storage/typed_records.hpp"

namespace airlock::storage {

result<std::optional<schema::template_record>> template_store::get(std::string_view name) const {
  return detail::get_record<schema::template_record>(store_, keyspace::templates, "template", name,
                                                     schema::decode_template);
}

void template_store::stage_put(write_batch& batch, const schema::template_record& record) {
  batch.put(keyspace::templates, record.name, schema::encode(record));
}

void template_store::stage_erase(write_batch& batch, std::string_view name) {
  batch.erase(keyspace::templates, name);
}

result<page<schema::template_record>> template_store::list(std::string_view tenant_id, size_t limit,
                                                           std::string_view cursor) const {
  return detail::list_records<schema::template_record>(
    store_, keyspace::templates, "template", schema::decode_template,
    [tenant_id](const schema::template_record& record) {
      return tenant_id.empty() || record.tenant_id.empty() || record.tenant_id == tenant_id;
    },
    limit, cursor);
}

} // namespace airlock::storage
