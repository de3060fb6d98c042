// api_bench's node side: airlockd's own worker_host in this process, driven
// through its node actor with the calls the HTTP routes make.

#include <sys/mount.h>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "airlockd/worker_host.hpp"
#include "bench/actor_ask.hpp"
#include "bench/api/sides.hpp"
#include "storage/kv_store.hpp"

namespace airlock::api_bench {
namespace {

template <class R, class Handle, class... Ts>
result<R> ask(caf::scoped_actor& self, const Handle& dest, Ts&&... xs) {
  return bench::ask_within<R>(self, timeout, dest, std::forward<Ts>(xs)...);
}

schema::sandbox_record record_for(const std::string& id, int cpu_millis = 50) {
  schema::sandbox_record record;
  record.id = id;
  record.tenant_id = "bench";
  record.spec.template_name = "minimal";
  record.spec.cpu_millis = cpu_millis;
  record.spec.memory_mb = 256;
  record.spec.disk_mb = 512;
  return record;
}

bool node_create(caf::actor_system& system, const actors::node_actor& node, const std::string& id,
                 int cpu_millis = 50) {
  caf::scoped_actor self{system};
  auto created = ask<actors::node_sandbox>(self, node, actors::nd_create_atom::value,
                                           record_for(id, cpu_millis));
  if (!created)
    std::cerr << "nd_create: " << created.error().message << "\n";
  return static_cast<bool>(created);
}

bool node_destroy(caf::actor_system& system, const actors::node_actor& node,
                  const std::string& id) {
  caf::scoped_actor self{system};
  return static_cast<bool>(
    ask<actors::node_sandbox>(self, node, actors::nd_destroy_atom::value, id));
}

bool node_exec(caf::actor_system& system, const actors::node_actor& node, const std::string& id) {
  caf::scoped_actor self{system};
  actors::exec_spec spec;
  spec.argv = {"true"};
  auto started = ask<actors::process_view>(self, node, actors::dp_exec_atom::value, id, spec);
  if (!started)
    return false;
  for (;;) {
    auto state = ask<actors::process_view>(self, node, actors::dp_proc_atom::value, id,
                                           started->process_id, uint32_t{10'000});
    if (!state)
      return false;
    if (schema::has_ended(state->state))
      return state->exit_code == 0;
  }
}

/// The same reads the SSE route makes: 64 KiB at most, 10 s wait, one in flight.
uint64_t node_read_all(caf::actor_system& system, const actors::node_actor& node,
                       const std::string& id, const std::string& process_id) {
  caf::scoped_actor self{system};
  actors::output_request request;
  request.process_id = process_id;
  request.max_bytes = 65'536;
  request.wait_ms = 10'000;
  uint64_t total = 0;
  for (;;) {
    auto batch = ask<actors::output_batch>(self, node, actors::dp_output_atom::value, id, request);
    if (!batch) {
      std::cerr << batch.error().message << " after " << total << " bytes\n";
      return total;
    }
    for (const auto& segment : batch->segments)
      total += segment.bytes.size();
    request.offset = batch->next_offset;
    if (batch->exited)
      return total;
  }
}

} // namespace

void run_node(const bench_options& opt, results& out) {
  std::string dir = opt.data_dir + "/worker";
  std::filesystem::create_directories(dir);
  actors::log_sink sink(std::cerr);
  actors::logger log("api_bench", actors::log_level::warn, sink);
  actors::system_config config;
  caf::actor_system system{config};
  auto store = storage::open_rocksdb_store(dir + "/worker-store");
  if (!store) {
    std::cerr << "worker store: " << store.error().message << "\n";
    return;
  }
  airlockd::sandbox_host_options host;
  host.instance = "apibenchw";
  host.veth_prefix = "aw";
  host.address_pool = "10.207.0.0/16";
  host.uid_base = 700'000'000;
  host.guest_binary =
    std::filesystem::path(opt.airlockd).parent_path().parent_path() / "guest" / "airlock-guest";
  airlockd::worker_host worker(log);
  if (auto started = worker.start(system, dir, host, **store); !started) {
    std::cerr << "worker: " << started.message << "\n";
    return;
  }
  auto node = worker.node();
  int serial = 0;
  auto fresh_id = [&serial] { return "sb_bench" + std::to_string(++serial); };
  if (auto id = fresh_id(); node_create(system, node, id))
    node_destroy(system, node, id);
  size_t row_index = 0;
  for (int level : {1, opt.clients}) {
    std::vector<std::vector<std::string>> made(static_cast<size_t>(level));
    std::mutex ids;
    auto create_ms = run_clients(level, opt.creates, [&](int c, int) {
      std::string id;
      {
        std::lock_guard lock(ids);
        id = fresh_id();
      }
      auto& mine = made[static_cast<size_t>(c)];
      bool created = node_create(system, node, id);
      if (created && mine.empty())
        mine.push_back(id); // as on the HTTP side: one kept per client
      else if (created)
        node_destroy(system, node, id);
      return created;
    });
    out.rows.at(row_index++).node = percentiles(create_ms);
    // A client whose creates all failed (e.g. "init did not exec" under load)
    // has no sandbox: it stops, as on the HTTP side, instead of reading
    // front() of an empty vector (the SIGSEGV seen once).
    auto exec_ms = run_clients(level, opt.execs, [&](int c, int) {
      const auto& mine = made[static_cast<size_t>(c)];
      return !mine.empty() && node_exec(system, node, mine.front());
    });
    out.rows.at(row_index++).node = percentiles(exec_ms);
    for (const auto& mine : made)
      for (const auto& id : mine)
        node_destroy(system, node, id);
  }
  auto box = fresh_id();
  if (opt.output_mb > 0 && node_create(system, node, box, opt.output_cpu_millis)) {
    std::cerr << "node reads: ";
    caf::scoped_actor self{system};
    actors::exec_spec spec;
    spec.cmd = output_command(opt);
    auto start = clock_type::now();
    auto started = ask<actors::process_view>(self, node, actors::dp_exec_atom::value, box, spec);
    if (started) {
      auto total = node_read_all(system, node, box, started->process_id);
      out.node_mib_s = static_cast<double>(total) / (1 << 20) / (ms_since(start) / 1000);
      if (total != opt.output_mb << 20)
        std::cerr << "node reads delivered " << total << " bytes\n";
    }
    node_destroy(system, node, box);
  }
  worker.stop();
  ::umount2((dir + "/rootfs").c_str(), MNT_DETACH);
}

} // namespace airlock::api_bench
