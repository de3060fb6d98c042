#include "tests/storage/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace airlock::storage::test {

schema::operation_record sample_operation(std::string id, std::string tenant_id,
                                          schema::operation_state state) {
  schema::operation_record r;
  r.id = std::move(id);
  r.kind = "sandbox.create";
  r.target_id = "sb_01HZX3K9Q2M4V7W8Y0A1B2C3D4";
  r.tenant_id = std::move(tenant_id);
  r.state = state;
  if (state == schema::operation_state::failed)
    r.error = schema::error_info{"io_error", "worker disk failed; retry on another worker"};
  if (state == schema::operation_state::succeeded)
    r.result_json = R"({"sandbox_id":"sb_01HZX3K9Q2M4V7W8Y0A1B2C3D4"})";
  r.created_at_ms = 1'717'000'000'000;
  r.updated_at_ms = 1'717'000'000'250;
  r.params_json = R"({"template":"python-3.12","cpu_millis":1000,"memory_mb":512,)"
                  R"("metadata":{"team":"search"}})";
  r.step = 2;
  r.step_started = true;
  r.step_data = std::string("\x01\x02\x00\x03worker=wk_7", 15);
  r.deadline_ms = 1'717'000'600'000;
  r.attempts = 1;
  r.sequence = 5;
  return r;
}

schema::sandbox_record sample_sandbox(std::string id, std::string tenant_id,
                                      schema::sandbox_state state) {
  schema::sandbox_record r;
  r.id = std::move(id);
  r.tenant_id = std::move(tenant_id);
  r.state = state;
  r.spec.template_name = "python-3.12";
  r.spec.env = {{"LANG", "C.UTF-8"}};
  r.worker_id = "wk_7";
  r.created_at_ms = 1'717'000'000'000;
  r.updated_at_ms = 1'717'000'000'250;
  r.last_operation_id = "op_1";
  return r;
}

void gated_store::open_gate() {
  {
    std::lock_guard lock(mutex_);
    open_ = true;
  }
  changed_.notify_all();
}

void gated_store::close_gate() {
  std::lock_guard lock(mutex_);
  open_ = false;
}

void gated_store::wait_until_blocked(size_t count) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this, count] { return blocked_ >= count; });
}

void gated_store::poison(std::string key) {
  std::lock_guard lock(mutex_);
  poison_ = std::move(key);
}

std::vector<size_t> gated_store::write_sizes() const {
  std::lock_guard lock(mutex_);
  return write_sizes_;
}

status gated_store::write(const write_batch& batch, durability mode) {
  std::string poison;
  {
    std::unique_lock lock(mutex_);
    ++blocked_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
    --blocked_;
    write_sizes_.push_back(batch.size());
    poison = poison_;
  }
  for (const auto& op : batch.ops()) {
    if (!poison.empty() && op.key == poison)
      return make_status(errc::io_error, "injected failure for key " + poison);
  }
  return inner_.write(batch, mode);
}

} // namespace airlock::storage::test
