#pragma once
// The node actor's test fixture: a real worker with real sandboxes behind a
// node actor, a manual wall clock, and small builders of exec and file specs.
// Shared by node_actor_test.cpp and node_output_pacing_test.cpp; each gets
// its own copy (an anonymous namespace), as a test fixture should.

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <caf/scoped_actor.hpp>

#include <filesystem>
#include <fstream>

#include "tests/rootfs/test_support.hpp"
#include "tests/worker/worker_fixture.hpp"
#include "worker/node_actor.hpp"

namespace airlock::worker::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using actors::exec_spec;
using actors::file_result;
using actors::file_spec;
using actors::file_verb;
using actors::node_sandbox;
using actors::output_batch;
using actors::output_request;
using actors::process_view;
constexpr auto timeout = 60s;
constexpr int64_t wall_start_ms = 1'800'000'000'000;

class node_actor_test : public real_worker_test {
protected:
  void SetUp() override {
    if (auto reason = worker_skip_reason(); !reason.empty())
      GTEST_SKIP() << reason;
    // No template yet: the node builds `minimal` on the first create.
    ASSERT_NO_FATAL_FAILURE(open_host(false));
    worker_options options;
    options.sandbox.output_buffer_bytes = 4096;
    adjust(options);
    worker_ = spawn_worker(*system_, host_.context(options));
    caf::scoped_actor self{*system_};
    auto report = ask<recover_report>(self, worker_, timeout, wk_recover_atom::value);
    ASSERT_TRUE(report) << report.error().message;
    node_context context;
    context.worker = worker_;
    context.rootfs = host_.rootfs;
    context.clock = clock_;
    node_ = spawn_node(*system_, context);
  }

  void TearDown() override {
    if (node_) {
      stop(node_);
      node_ = actors::node_actor{};
    }
    close_host();
  }

  /// Lets a derived fixture change the worker's options before it starts.
  virtual void adjust(worker_options& options) { (void)options; }

  static schema::sandbox_record record(const std::string& id,
                                       const std::string& template_name = "minimal") {
    schema::sandbox_record rec;
    rec.id = id;
    rec.tenant_id = "tn_test";
    rec.spec.template_name = template_name;
    rec.spec.disk_mb = 0;
    return rec;
  }

  result<node_sandbox> create(const schema::sandbox_record& rec) {
    caf::scoped_actor self{*system_};
    return ask<node_sandbox>(self, node_, timeout, actors::nd_create_atom::value, rec);
  }

  /// Creates and asserts it ran.
  void must_create(const std::string& id) {
    auto created = create(record(id));
    ASSERT_TRUE(created) << created.error().message;
    ASSERT_EQ(created->state, schema::sandbox_state::running);
  }

  result<process_view> exec(const std::string& id, const exec_spec& spec) {
    caf::scoped_actor self{*system_};
    return ask<process_view>(self, node_, timeout, actors::dp_exec_atom::value, id, spec);
  }

  std::string must_exec(const std::string& id, const exec_spec& spec) {
    auto view = exec(id, spec);
    EXPECT_TRUE(view) << view.error().message;
    return view ? view->process_id : std::string{};
  }

  result<output_batch> output(const std::string& id, const output_request& req) {
    caf::scoped_actor self{*system_};
    return ask<output_batch>(self, node_, timeout, actors::dp_output_atom::value, id, req);
  }

  /// Everything from `offset` until the process exits, as "fd:bytes@end " pieces.
  std::string collect(const std::string& id, const std::string& proc, uint64_t offset = 0,
                      bool want_stdout = true, bool want_stderr = true,
                      output_batch* last = nullptr) {
    std::string out;
    for (int round = 0; round < 10000; ++round) {
      output_request req{proc, offset, want_stdout, want_stderr, 0, 5000};
      auto batch = output(id, req);
      EXPECT_TRUE(batch) << batch.error().message;
      if (!batch)
        return out;
      for (const auto& segment : batch->segments)
        out += std::to_string(segment.fd) + ":" + segment.bytes + "@"
               + std::to_string(segment.end_offset) + " ";
      offset = batch->next_offset;
      if (batch->exited) {
        if (last != nullptr)
          *last = *batch;
        return out;
      }
    }
    ADD_FAILURE() << proc << " did not exit";
    return out;
  }

  /// Only the bytes (stdout and stderr) until the exit.
  std::string text(const std::string& id, const std::string& proc) {
    std::string out;
    uint64_t offset = 0;
    for (int round = 0; round < 10000; ++round) {
      auto batch = output(id, output_request{proc, offset, true, true, 0, 5000});
      EXPECT_TRUE(batch) << batch.error().message;
      if (!batch)
        return out;
      for (const auto& segment : batch->segments)
        out += segment.bytes;
      offset = batch->next_offset;
      if (batch->exited)
        return out;
    }
    ADD_FAILURE() << proc << " did not exit";
    return out;
  }

  /// Waits until the combined stream reaches `offset` (bytes arrived).
  void await_offset(const std::string& id, const std::string& proc, uint64_t offset) {
    uint64_t at = 0;
    for (int round = 0; round < 1000 && at < offset; ++round) {
      auto batch = output(id, output_request{proc, at, true, true, 0, 5000});
      ASSERT_TRUE(batch) << batch.error().message;
      at = batch->next_offset;
    }
    ASSERT_GE(at, offset);
  }

  result<process_view> proc(const std::string& id, const std::string& process, uint32_t wait_ms) {
    caf::scoped_actor self{*system_};
    return ask<process_view>(self, node_, timeout, actors::dp_proc_atom::value, id, process,
                             wait_ms);
  }

  /// The process's row, waiting up to `wait_ms` for its exit.
  process_view proc_of(const std::string& id, const std::string& process, uint32_t wait_ms) {
    auto view = proc(id, process, wait_ms);
    EXPECT_TRUE(view) << view.error().message;
    return view ? *view : process_view{};
  }

  /// The process's row once it exited (bounded).
  process_view proc_wait(const std::string& id, const std::string& process) {
    return proc_of(id, process, 20'000);
  }

  result<bool> stdin_bytes(const std::string& id, const std::string& process, std::string bytes,
                           bool close) {
    caf::scoped_actor self{*system_};
    return ask<bool>(self, node_, timeout, actors::dp_stdin_atom::value, id, process,
                     std::move(bytes), close);
  }

  result<file_result> file(const std::string& id, file_spec spec) {
    caf::scoped_actor self{*system_};
    return ask<file_result>(self, node_, timeout, actors::dp_file_atom::value, id, std::move(spec));
  }

  std::shared_ptr<manual_wall_clock> clock_ = std::make_shared<manual_wall_clock>(wall_start_ms);
  actors::node_actor node_;
};

inline exec_spec shell(std::string line, bool stdin_open = false) {
  exec_spec spec;
  spec.cmd = std::move(line);
  spec.stdin_open = stdin_open;
  return spec;
}

inline exec_spec argv(std::vector<std::string> args) {
  exec_spec spec;
  spec.argv = std::move(args);
  return spec;
}

inline file_spec fspec(file_verb verb, std::string path) {
  file_spec spec;
  spec.verb = verb;
  spec.path = std::move(path);
  return spec;
}
} // namespace
} // namespace airlock::worker::test
