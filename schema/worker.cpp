#include "schema/worker.hpp"

#include "schema/capnp_codec.hpp"
#include "schema/worker.capnp.h"

namespace airlock::schema {

namespace {

namespace cs = airlock::capnp_schema;

} // namespace

std::string encode(const worker_registration& r) {
  return detail::to_bytes<cs::WorkerRegistration>([&r](cs::WorkerRegistration::Builder b) {
    b.setSchemaVersion(worker_schema_version);
    b.setId(r.id);
    b.setName(r.name);
    b.setClusterAddress(r.cluster_address);
    b.setDataUrl(r.data_url);
    detail::fill_resources(b.initCapacity(), r.capacity);
    detail::fill_texts(b.initRuntimes(detail::count(r.runtimes.size())), r.runtimes);
    b.setVersion(r.version);
    b.setStartedAtMs(r.started_at_ms);
    b.setEgressCaPublicKey(r.egress_ca_public_key);
    b.setCertificate(r.certificate);
    b.setProof(r.proof);
    b.setSessionSecret(r.session_secret);
    detail::fill_resources(b.initDefaultRequest(), r.default_request);
    b.setMemoryLimitPercent(r.memory_limit_percent);
  });
}

result<worker_registration> decode_worker_registration(std::string_view bytes) {
  return detail::from_bytes<cs::WorkerRegistration, worker_registration>(
    bytes, worker_schema_version, "worker registration",
    [](cs::WorkerRegistration::Reader b) -> result<worker_registration> {
      worker_registration r;
      r.id = detail::text(b.getId());
      r.name = detail::text(b.getName());
      r.cluster_address = detail::text(b.getClusterAddress());
      r.data_url = detail::text(b.getDataUrl());
      r.capacity = detail::read_resources(b.getCapacity());
      r.runtimes = detail::read_texts(b.getRuntimes());
      r.version = detail::text(b.getVersion());
      r.started_at_ms = b.getStartedAtMs();
      r.egress_ca_public_key = detail::text(b.getEgressCaPublicKey());
      r.certificate = detail::text(b.getCertificate());
      r.proof = detail::text(b.getProof());
      r.session_secret = detail::text(b.getSessionSecret());
      r.default_request = detail::read_resources(b.getDefaultRequest());
      r.memory_limit_percent = b.getMemoryLimitPercent();
      return r;
    });
}

std::string encode(const worker_heartbeat& h) {
  return detail::to_bytes<cs::WorkerHeartbeat>([&h](cs::WorkerHeartbeat::Builder b) {
    b.setSchemaVersion(worker_schema_version);
    b.setWorkerId(h.worker_id);
    b.setSequence(h.sequence);
    b.setSentAtMs(h.sent_at_ms);
    detail::fill_resources(b.initAllocated(), h.allocated);
    detail::fill_texts(b.initSandboxIds(detail::count(h.sandbox_ids.size())), h.sandbox_ids);
    b.setLoadMilli(h.load_milli);
    detail::fill_resources(b.initLimited(), h.limited);
    detail::fill_resources(b.initUsed(), h.used);
    b.setMemoryPressure(h.memory_pressure);
    b.setPressureReason(h.pressure_reason);
  });
}

result<worker_heartbeat> decode_worker_heartbeat(std::string_view bytes) {
  return detail::from_bytes<cs::WorkerHeartbeat, worker_heartbeat>(
    bytes, worker_schema_version, "worker heartbeat",
    [](cs::WorkerHeartbeat::Reader b) -> result<worker_heartbeat> {
      worker_heartbeat h;
      h.worker_id = detail::text(b.getWorkerId());
      h.sequence = b.getSequence();
      h.sent_at_ms = b.getSentAtMs();
      h.allocated = detail::read_resources(b.getAllocated());
      h.sandbox_ids = detail::read_texts(b.getSandboxIds());
      h.load_milli = b.getLoadMilli();
      h.limited = detail::read_resources(b.getLimited());
      h.used = detail::read_resources(b.getUsed());
      h.memory_pressure = b.getMemoryPressure();
      h.pressure_reason = detail::text(b.getPressureReason());
      return h;
    });
}

} // namespace airlock::schema
