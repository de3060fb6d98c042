// The cluster link's mutual TLS against the plain CAF link it wraps, side by
// side in one run: the round trip of a small message (what a heartbeat or a
// dp_* call costs), the CPU both ends spend per round trip, and the
// throughput of 1 MiB messages (what a relayed file's chunks cost). Both
// links connect two actor systems of this process over loopback; the TLS
// one uses certificates made as airlockd makes them (two roots, EC P-256).
//
//   build/bench/cluster_link_bench [--round-trips 5000] [--mib 256]

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "actors/cluster_tls.hpp"
#include "actors/system_config.hpp"
#include "bench/bench_flags.hpp"
#include "crypto/cluster_certificates.hpp"
#include "schema/atomic_file.hpp"

namespace airlock::bench {
namespace {

using std::chrono::duration;
using std::chrono::steady_clock;

struct bench_options {
  uint32_t round_trips = 5000;
  uint32_t mib = 256;
};

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "cluster_link_bench: " << what << "\n";
  std::exit(1);
}

using tls_files = actors::cluster_tls_files;

/// An actor system with the middleman and, given files, CAF's TLS module.
struct node {
  explicit node(const std::optional<tls_files>& tls) : config(actors::actor_system_options{2}) {
    actors::use_middleman(config);
    if (tls)
      actors::use_cluster_tls(config, *tls);
    system = std::make_unique<caf::actor_system>(config);
  }
  actors::system_config config;
  std::unique_ptr<caf::actor_system> system;
};

/// Writes both roots and a member certificate for each side into `dir`.
std::pair<tls_files, tls_files> make_certificates(const std::string& dir) {
  auto control_ca = *crypto::create_root_ca("bench control-plane CA", 30);
  auto worker_ca = *crypto::create_root_ca("bench worker CA", 30);
  auto member = [&](const crypto::key_and_cert& ca, const std::string& name) {
    auto key = *crypto::generate_key_pem();
    auto cert = *crypto::issue_member_certificate(ca, *crypto::create_csr(key, name), name, 30);
    if (!write_file_atomically(dir + "/" + name + ".key", key, 0600)
        || !write_file_atomically(dir + "/" + name + ".crt", cert, 0644))
      fail("cannot write certificates under " + dir);
  };
  member(control_ca, "control");
  member(worker_ca, "worker");
  if (!write_file_atomically(dir + "/control-ca.crt", control_ca.cert_pem, 0644)
      || !write_file_atomically(dir + "/worker-ca.crt", worker_ca.cert_pem, 0644))
    fail("cannot write CA certificates under " + dir);
  return {{dir + "/control.crt", dir + "/control.key", dir + "/worker-ca.crt"},
          {dir + "/worker.crt", dir + "/worker.key", dir + "/control-ca.crt"}};
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
         + static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

struct figures {
  double round_trip_us = 0;
  double cpu_us_per_round_trip = 0;
  double mib_per_s = 0;
};

figures measure(caf::actor_system& client, const caf::actor& echo, const bench_options& options) {
  figures out;
  caf::scoped_actor self(client);
  auto ask = [&](const std::string& payload) {
    bool ok = false;
    self->request(echo, std::chrono::seconds(30), payload)
      .receive([&](uint64_t) { ok = true; }, [&](caf::error& e) { fail(client.render(e)); });
    return ok;
  };
  const std::string small(64, 's');
  for (int i = 0; i < 200; ++i)
    ask(small); // warm up: connection, caches
  const double cpu_before = cpu_seconds();
  auto started = steady_clock::now();
  for (uint32_t i = 0; i < options.round_trips; ++i)
    ask(small);
  const double elapsed = duration<double>(steady_clock::now() - started).count();
  out.round_trip_us = elapsed * 1e6 / options.round_trips;
  out.cpu_us_per_round_trip = (cpu_seconds() - cpu_before) * 1e6 / options.round_trips;
  const std::string chunk(1 << 20, 'c');
  started = steady_clock::now();
  for (uint32_t i = 0; i < options.mib; ++i)
    ask(chunk);
  out.mib_per_s = options.mib / duration<double>(steady_clock::now() - started).count();
  return out;
}

int run(const bench_options& options) {
  std::string dir = (std::filesystem::temp_directory_path() / "cluster_link_bench_XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr)
    fail("cannot make a scratch directory");
  auto [server_files, client_files] = make_certificates(dir);

  node server(server_files);
  auto echo = server.system->spawn([]() -> caf::behavior {
    return {[](const std::string& payload) { return static_cast<uint64_t>(payload.size()); }};
  });
  auto plain_port = server.system->middleman().publish(echo, 0, "127.0.0.1", true);
  auto tls_port = caf::openssl::publish(echo, 0, "127.0.0.1", true);
  if (!plain_port || !tls_port)
    fail("cannot publish the echo actor");

  node plain_client(std::nullopt);
  node tls_client(client_files);
  auto plain_echo = plain_client.system->middleman().remote_actor("127.0.0.1", *plain_port);
  auto tls_echo = caf::openssl::remote_actor(*tls_client.system, "127.0.0.1", *tls_port);
  if (!plain_echo || !tls_echo)
    fail("cannot connect: "
         + (plain_echo ? tls_client.system->render(tls_echo.error())
                       : plain_client.system->render(plain_echo.error())));
  auto plain = measure(*plain_client.system, *plain_echo, options);
  auto tls = measure(*tls_client.system, *tls_echo, options);

  std::printf("cluster link over loopback, %u round trips of 64 B, %u messages of 1 MiB\n",
              options.round_trips, options.mib);
  std::printf("%-26s %14s %18s %14s\n", "link", "round trip us", "CPU us/round trip",
              "1 MiB msgs MiB/s");
  std::printf("%-26s %14.1f %18.1f %14.1f\n", "plain CAF (BASP over TCP)", plain.round_trip_us,
              plain.cpu_us_per_round_trip, plain.mib_per_s);
  std::printf("%-26s %14.1f %18.1f %14.1f\n", "mutual TLS (caf::openssl)", tls.round_trip_us,
              tls.cpu_us_per_round_trip, tls.mib_per_s);
  // One heartbeat is one small round trip every heartbeat interval (1 s).
  std::printf("heartbeat CPU per worker at 1 beat/s, both ends: plain %.1f us/s, TLS %.1f us/s\n",
              plain.cpu_us_per_round_trip, tls.cpu_us_per_round_trip);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(dir);
  return 0;
}

} // namespace
} // namespace airlock::bench

int main(int argc, char** argv) {
  airlock::bench::bench_options options;
  airlock::bench::bench_flags flags{
    "cluster_link_bench",
    "The cluster link's mutual TLS against plain CAF over loopback: small round trips, CPU\n"
    "per round trip, 1 MiB message throughput."};
  flags.integer("round-trips", options.round_trips, "small round trips measured", 1, 10'000'000)
    .integer("mib", options.mib, "1 MiB messages sent", 1, 1'000'000);
  if (auto status = flags.parse(argc, argv))
    return *status;
  return airlock::bench::run(options);
}
