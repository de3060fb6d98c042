#include "schema/cluster.hpp"

#include "schema/capnp_codec.hpp"
#include "schema/cluster.capnp.h"

namespace airlock::schema {

namespace {

namespace cs = airlock::capnp_schema;

// -- nested parts: filled and read without a schema version of their own ----

void fill_segment(cs::OutputSegment::Builder b, const output_segment& x) {
  b.setFd(x.fd);
  b.setEndOffset(x.end_offset);
  b.setBytes(detail::as_data(x.bytes));
}

output_segment read_segment(cs::OutputSegment::Reader b) {
  return output_segment{b.getFd(), b.getEndOffset(), detail::data(b.getBytes())};
}

void fill_entry(cs::FileEntry::Builder b, const file_entry& x) {
  b.setName(x.name);
  b.setType(x.type);
  b.setSizeBytes(x.size_bytes);
  b.setMode(x.mode);
  b.setModifiedAtMs(x.modified_at_ms);
  b.setUid(x.uid);
  b.setGid(x.gid);
  b.setOwner(x.owner);
  b.setGroup(x.group);
  b.setSymlinkTarget(x.symlink_target);
}

file_entry read_entry(cs::FileEntry::Reader b) {
  return file_entry{detail::text(b.getName()),
                    detail::text(b.getType()),
                    b.getSizeBytes(),
                    b.getMode(),
                    b.getModifiedAtMs(),
                    b.getUid(),
                    b.getGid(),
                    detail::text(b.getOwner()),
                    detail::text(b.getGroup()),
                    detail::text(b.getSymlinkTarget())};
}

} // namespace

std::string encode(const node_sandbox& x) {
  return detail::to_bytes<cs::NodeSandbox>([&x](cs::NodeSandbox::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setSandboxId(x.sandbox_id);
    b.setState(static_cast<cs::SandboxState>(x.state));
  });
}

result<node_sandbox> decode_node_sandbox(std::string_view bytes) {
  return detail::from_bytes<cs::NodeSandbox, node_sandbox>(
    bytes, cluster_schema_version, "node sandbox",
    [](cs::NodeSandbox::Reader b) -> result<node_sandbox> {
      if (!detail::enum_in_range(b.getState(), cs::SandboxState::ERROR))
        return detail::enum_too_new("node sandbox");
      return node_sandbox{detail::text(b.getSandboxId()), static_cast<sandbox_state>(b.getState())};
    });
}

std::string encode(const exec_spec& x) {
  return detail::to_bytes<cs::ExecSpec>([&x](cs::ExecSpec::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    detail::fill_texts(b.initArgv(detail::count(x.argv.size())), x.argv);
    b.setCmd(x.cmd);
    detail::fill_pairs(b.initEnv(detail::count(x.env.size())), x.env);
    b.setCwd(x.cwd);
    b.setUser(x.user);
    b.setPty(x.pty);
    b.setRows(x.rows);
    b.setCols(x.cols);
    b.setStdinOpen(x.stdin_open);
    b.setTimeoutS(x.timeout_s);
    auto run_as = b.initRunAs();
    run_as.setSetUser(x.run_as.set_user);
    run_as.setUid(x.run_as.uid);
    run_as.setGid(x.run_as.gid);
    run_as.setHome(x.run_as.home);
    b.setReportStartFailure(x.report_start_failure);
    b.setTag(x.tag);
    detail::fill_pairs(b.initRequestEnv(detail::count(x.request_env.size())), x.request_env);
  });
}

result<exec_spec> decode_exec_spec(std::string_view bytes) {
  return detail::from_bytes<cs::ExecSpec, exec_spec>(
    bytes, cluster_schema_version, "exec spec", [](cs::ExecSpec::Reader b) -> result<exec_spec> {
      exec_spec x;
      x.argv = detail::read_texts(b.getArgv());
      x.cmd = detail::text(b.getCmd());
      x.env = detail::read_pairs<decltype(x.env)>(b.getEnv());
      x.cwd = detail::text(b.getCwd());
      x.user = detail::text(b.getUser());
      x.pty = b.getPty();
      x.rows = b.getRows();
      x.cols = b.getCols();
      x.stdin_open = b.getStdinOpen();
      x.timeout_s = b.getTimeoutS();
      auto run_as = b.getRunAs();
      x.run_as.set_user = run_as.getSetUser();
      x.run_as.uid = run_as.getUid();
      x.run_as.gid = run_as.getGid();
      x.run_as.home = detail::text(run_as.getHome());
      x.report_start_failure = b.getReportStartFailure();
      x.tag = detail::text(b.getTag());
      x.request_env = detail::read_pairs<decltype(x.request_env)>(b.getRequestEnv());
      return x;
    });
}

std::string_view to_string(process_state state) noexcept {
  switch (state) {
    case process_state::starting: return "starting";
    case process_state::running: return "running";
    case process_state::exited: return "exited";
    case process_state::failed: return "failed";
  }
  return "starting";
}

std::optional<process_state> parse_process_state(std::string_view text) noexcept {
  for (auto state : {process_state::starting, process_state::running, process_state::exited,
                     process_state::failed})
    if (text == to_string(state))
      return state;
  return std::nullopt;
}

std::string encode(const process_view& x) {
  return detail::to_bytes<cs::ProcessView>([&x](cs::ProcessView::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setProcessId(x.process_id);
    // An older control plane shows this word as it is.
    b.setState(has_ended(x.state) ? "exited" : "running");
    b.setExitCode(x.exit_code);
    b.setSignal(x.signal);
    b.setStartedAtMs(x.started_at_ms);
    b.setEndedAtMs(x.ended_at_ms);
    b.setError(x.error);
    b.setLifecycle(std::string(to_string(x.state)));
    b.setPid(x.pid);
    b.setStdoutBytes(x.stdout_bytes);
    b.setStderrBytes(x.stderr_bytes);
    b.setPty(x.pty);
    detail::fill_texts(b.initArgv(detail::count(x.argv.size())), x.argv);
    b.setCmd(x.cmd);
    b.setCwd(x.cwd);
    detail::fill_pairs(b.initEnv(detail::count(x.env.size())), x.env);
    b.setTag(x.tag);
  });
}

result<process_view> decode_process_view(std::string_view bytes) {
  return detail::from_bytes<cs::ProcessView, process_view>(
    bytes, cluster_schema_version, "process view",
    [](cs::ProcessView::Reader b) -> result<process_view> {
      process_view x;
      x.process_id = detail::text(b.getProcessId());
      auto state = parse_process_state(detail::text(b.getLifecycle()));
      if (!state) // an older worker: only the API's two states
        state =
          detail::text(b.getState()) == "exited" ? process_state::exited : process_state::running;
      x.state = *state;
      x.exit_code = b.getExitCode();
      x.signal = b.getSignal();
      x.started_at_ms = b.getStartedAtMs();
      x.ended_at_ms = b.getEndedAtMs();
      x.error = detail::text(b.getError());
      x.pid = b.getPid();
      x.stdout_bytes = b.getStdoutBytes();
      x.stderr_bytes = b.getStderrBytes();
      x.pty = b.getPty();
      x.argv = detail::read_texts(b.getArgv());
      x.cmd = detail::text(b.getCmd());
      x.cwd = detail::text(b.getCwd());
      x.env = detail::read_pairs<decltype(x.env)>(b.getEnv());
      x.tag = detail::text(b.getTag());
      return x;
    });
}

std::string encode(const output_request& x) {
  return detail::to_bytes<cs::OutputRequest>([&x](cs::OutputRequest::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setProcessId(x.process_id);
    b.setOffset(x.offset);
    b.setWantStdout(x.want_stdout);
    b.setWantStderr(x.want_stderr);
    b.setMaxBytes(x.max_bytes);
    b.setWaitMs(x.wait_ms);
  });
}

result<output_request> decode_output_request(std::string_view bytes) {
  return detail::from_bytes<cs::OutputRequest, output_request>(
    bytes, cluster_schema_version, "output request",
    [](cs::OutputRequest::Reader b) -> result<output_request> {
      return output_request{detail::text(b.getProcessId()),
                            b.getOffset(),
                            b.getWantStdout(),
                            b.getWantStderr(),
                            b.getMaxBytes(),
                            b.getWaitMs()};
    });
}

std::string encode(const output_segment& x) {
  return detail::to_bytes<cs::OutputSegment>([&x](cs::OutputSegment::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    fill_segment(b, x);
  });
}

result<output_segment> decode_output_segment(std::string_view bytes) {
  return detail::from_bytes<cs::OutputSegment, output_segment>(
    bytes, cluster_schema_version, "output segment",
    [](cs::OutputSegment::Reader b) -> result<output_segment> { return read_segment(b); });
}

std::string encode(const output_batch& x) {
  return detail::to_bytes<cs::OutputBatch>([&x](cs::OutputBatch::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    auto segments = b.initSegments(detail::count(x.segments.size()));
    for (unsigned i = 0; i < x.segments.size(); ++i)
      fill_segment(segments[i], x.segments[i]);
    b.setNextOffset(x.next_offset);
    b.setStartOffset(x.start_offset);
    b.setExited(x.exited);
    b.setExitCode(x.exit_code);
    b.setSignal(x.signal);
  });
}

result<output_batch> decode_output_batch(std::string_view bytes) {
  return detail::from_bytes<cs::OutputBatch, output_batch>(
    bytes, cluster_schema_version, "output batch",
    [](cs::OutputBatch::Reader b) -> result<output_batch> {
      output_batch x;
      x.segments.reserve(b.getSegments().size());
      for (auto segment : b.getSegments())
        x.segments.push_back(read_segment(segment));
      x.next_offset = b.getNextOffset();
      x.start_offset = b.getStartOffset();
      x.exited = b.getExited();
      x.exit_code = b.getExitCode();
      x.signal = b.getSignal();
      return x;
    });
}

std::string encode(const file_spec& x) {
  return detail::to_bytes<cs::FileSpec>([&x](cs::FileSpec::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setVerb(static_cast<cs::FileVerb>(x.verb));
    b.setPath(x.path);
    b.setTo(x.to);
    b.setData(detail::as_data(x.data));
    b.setOffset(x.offset);
    b.setLength(x.length);
    b.setMode(x.mode);
    b.setRecursive(x.recursive);
    b.setSession(x.session);
  });
}

result<file_spec> decode_file_spec(std::string_view bytes) {
  return detail::from_bytes<cs::FileSpec, file_spec>(
    bytes, cluster_schema_version, "file spec", [](cs::FileSpec::Reader b) -> result<file_spec> {
      if (!detail::enum_in_range(b.getVerb(), cs::FileVerb::WRITE_ABORT))
        return detail::enum_too_new("file spec");
      file_spec x;
      x.verb = static_cast<file_verb>(b.getVerb());
      x.path = detail::text(b.getPath());
      x.to = detail::text(b.getTo());
      x.data = detail::data(b.getData());
      x.offset = b.getOffset();
      x.length = b.getLength();
      x.mode = b.getMode();
      x.recursive = b.getRecursive();
      x.session = b.getSession();
      return x;
    });
}

std::string encode(const file_entry& x) {
  return detail::to_bytes<cs::FileEntry>([&x](cs::FileEntry::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    fill_entry(b, x);
  });
}

result<file_entry> decode_file_entry(std::string_view bytes) {
  return detail::from_bytes<cs::FileEntry, file_entry>(
    bytes, cluster_schema_version, "file entry",
    [](cs::FileEntry::Reader b) -> result<file_entry> { return read_entry(b); });
}

std::string encode(const file_result& x) {
  return detail::to_bytes<cs::FileResult>([&x](cs::FileResult::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setData(detail::as_data(x.data));
    b.setWritten(x.written);
    auto entries = b.initEntries(detail::count(x.entries.size()));
    for (unsigned i = 0; i < x.entries.size(); ++i)
      fill_entry(entries[i], x.entries[i]);
    b.setTruncated(x.truncated);
    fill_entry(b.initInfo(), x.info);
    b.setSession(x.session);
  });
}

result<file_result> decode_file_result(std::string_view bytes) {
  return detail::from_bytes<cs::FileResult, file_result>(
    bytes, cluster_schema_version, "file result",
    [](cs::FileResult::Reader b) -> result<file_result> {
      file_result x;
      x.data = detail::data(b.getData());
      x.written = b.getWritten();
      x.entries.reserve(b.getEntries().size());
      for (auto entry : b.getEntries())
        x.entries.push_back(read_entry(entry));
      x.truncated = b.getTruncated();
      x.info = read_entry(b.getInfo());
      x.session = b.getSession();
      return x;
    });
}

std::string encode(const placement_request& x) {
  return detail::to_bytes<cs::PlacementRequest>([&x](cs::PlacementRequest::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setSandboxId(x.sandbox_id);
    b.setTemplateName(x.template_name);
    detail::fill_resources(b.initNeeds(), x.needs);
    detail::fill_resources(b.initRequests(), x.requests);
    b.setSnapshotWorker(x.snapshot_worker);
    b.setRuntime(x.runtime);
  });
}

result<placement_request> decode_placement_request(std::string_view bytes) {
  return detail::from_bytes<cs::PlacementRequest, placement_request>(
    bytes, cluster_schema_version, "placement request",
    [](cs::PlacementRequest::Reader b) -> result<placement_request> {
      return placement_request{
        detail::text(b.getSandboxId()),       detail::text(b.getTemplateName()),
        detail::read_resources(b.getNeeds()), detail::read_resources(b.getRequests()),
        detail::text(b.getSnapshotWorker()),  detail::text(b.getRuntime())};
    });
}

std::string encode(const template_build& x) {
  return detail::to_bytes<cs::TemplateBuild>([&x](cs::TemplateBuild::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setWorkerName(x.worker_name);
    b.setSpoolId(x.spool_id);
    b.setFormat(x.format);
    b.setCompressedBytesMax(x.compressed_bytes_max);
    b.setUncompressedBytesMax(x.uncompressed_bytes_max);
    b.setEntriesMax(x.entries_max);
    b.setPathBytesMax(x.path_bytes_max);
    b.setStartCmd(x.start_cmd);
    b.setRecipeJson(x.recipe_json);
    b.setBaseWorkerName(x.base_worker_name);
  });
}

result<template_build> decode_template_build(std::string_view bytes) {
  return detail::from_bytes<cs::TemplateBuild, template_build>(
    bytes, cluster_schema_version, "template build",
    [](cs::TemplateBuild::Reader b) -> result<template_build> {
      template_build x;
      x.worker_name = detail::text(b.getWorkerName());
      x.spool_id = detail::text(b.getSpoolId());
      x.format = detail::text(b.getFormat());
      x.compressed_bytes_max = b.getCompressedBytesMax();
      x.uncompressed_bytes_max = b.getUncompressedBytesMax();
      x.entries_max = b.getEntriesMax();
      x.path_bytes_max = b.getPathBytesMax();
      x.start_cmd = detail::text(b.getStartCmd());
      x.recipe_json = detail::text(b.getRecipeJson());
      x.base_worker_name = detail::text(b.getBaseWorkerName());
      return x;
    });
}

std::string encode(const template_built& x) {
  return detail::to_bytes<cs::TemplateBuilt>([&x](cs::TemplateBuilt::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setDigest(x.digest);
    b.setSizeBytes(x.size_bytes);
    b.setFiles(x.files);
    detail::fill_pairs(b.initEnv(detail::count(x.env.size())), x.env);
    b.setWorkdir(x.workdir);
    b.setUser(x.user);
    b.setStartCmd(x.start_cmd);
    b.setLogTail(x.log_tail);
  });
}

result<template_built> decode_template_built(std::string_view bytes) {
  return detail::from_bytes<cs::TemplateBuilt, template_built>(
    bytes, cluster_schema_version, "template built",
    [](cs::TemplateBuilt::Reader b) -> result<template_built> {
      template_built x;
      x.digest = detail::text(b.getDigest());
      x.size_bytes = b.getSizeBytes();
      x.files = b.getFiles();
      x.env = detail::read_pairs<std::vector<std::pair<std::string, std::string>>>(b.getEnv());
      x.workdir = detail::text(b.getWorkdir());
      x.user = detail::text(b.getUser());
      x.start_cmd = detail::text(b.getStartCmd());
      x.log_tail = detail::text(b.getLogTail());
      return x;
    });
}

std::string encode(const template_progress& x) {
  return detail::to_bytes<cs::TemplateProgress>([&x](cs::TemplateProgress::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setBuilding(x.building);
    b.setStep(x.step);
    b.setPercent(x.percent);
    b.setBytesDone(x.bytes_done);
    b.setBytesTotal(x.bytes_total);
    b.setLogOffset(x.log_offset);
    b.setLog(x.log);
    b.setLogEnd(x.log_end);
  });
}

result<template_progress> decode_template_progress(std::string_view bytes) {
  return detail::from_bytes<cs::TemplateProgress, template_progress>(
    bytes, cluster_schema_version, "template progress",
    [](cs::TemplateProgress::Reader b) -> result<template_progress> {
      template_progress x;
      x.building = b.getBuilding();
      x.step = detail::text(b.getStep());
      x.percent = b.getPercent();
      x.bytes_done = b.getBytesDone();
      x.bytes_total = b.getBytesTotal();
      x.log_offset = b.getLogOffset();
      x.log = detail::text(b.getLog());
      x.log_end = b.getLogEnd();
      return x;
    });
}

std::string encode(const registration_ack& x) {
  return detail::to_bytes<cs::RegistrationAck>([&x](cs::RegistrationAck::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setWorkerId(x.worker_id);
    b.setTokenPublicKey(detail::as_data(x.token_public_key));
    b.setHeartbeatIntervalMs(x.heartbeat_interval_ms);
    b.setEgressCaChain(x.egress_ca_chain);
  });
}

result<registration_ack> decode_registration_ack(std::string_view bytes) {
  return detail::from_bytes<cs::RegistrationAck, registration_ack>(
    bytes, cluster_schema_version, "registration ack",
    [](cs::RegistrationAck::Reader b) -> result<registration_ack> {
      return registration_ack{detail::text(b.getWorkerId()), detail::data(b.getTokenPublicKey()),
                              b.getHeartbeatIntervalMs(), detail::text(b.getEgressCaChain())};
    });
}

std::string encode(const worker_view& x) {
  auto registration = encode(x.registration);
  return detail::to_bytes<cs::WorkerView>([&x, &registration](cs::WorkerView::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setRegistration(detail::as_data(registration));
    b.setState(x.state);
    detail::fill_resources(b.initAllocated(), x.allocated);
    b.setLastHeartbeatAtMs(x.last_heartbeat_at_ms);
    detail::fill_resources(b.initReserved(), x.reserved);
    detail::fill_texts(b.initSandboxIds(detail::count(x.sandbox_ids.size())), x.sandbox_ids);
    detail::fill_resources(b.initLimited(), x.limited);
    detail::fill_resources(b.initUsed(), x.used);
    b.setMemoryPressure(x.memory_pressure);
    b.setPressureReason(x.pressure_reason);
  });
}

result<worker_view> decode_worker_view(std::string_view bytes) {
  return detail::from_bytes<cs::WorkerView, worker_view>(
    bytes, cluster_schema_version, "worker view",
    [](cs::WorkerView::Reader b) -> result<worker_view> {
      auto registration = decode_worker_registration(detail::data(b.getRegistration()));
      if (!registration)
        return registration.error();
      worker_view x;
      x.registration = std::move(*registration);
      x.state = detail::text(b.getState());
      x.allocated = detail::read_resources(b.getAllocated());
      x.last_heartbeat_at_ms = b.getLastHeartbeatAtMs();
      x.reserved = detail::read_resources(b.getReserved());
      x.sandbox_ids = detail::read_texts(b.getSandboxIds());
      x.limited = detail::read_resources(b.getLimited());
      x.used = detail::read_resources(b.getUsed());
      x.memory_pressure = b.getMemoryPressure();
      x.pressure_reason = detail::text(b.getPressureReason());
      return x;
    });
}

std::string encode(const sandbox_usage& x) {
  return detail::to_bytes<cs::SandboxUsage>([&x](cs::SandboxUsage::Builder b) {
    b.setSchemaVersion(cluster_schema_version);
    b.setSampledAtMs(x.sampled_at_ms);
    b.setCpuUsageNs(x.cpu_usage_ns);
    b.setCpuUsedPct(x.cpu_used_pct);
    b.setMemoryBytes(x.memory_bytes);
    b.setDiskUsedBytes(x.disk_used_bytes);
    b.setProcesses(x.processes);
  });
}

result<sandbox_usage> decode_sandbox_usage(std::string_view bytes) {
  return detail::from_bytes<cs::SandboxUsage, sandbox_usage>(
    bytes, cluster_schema_version, "sandbox usage",
    [](cs::SandboxUsage::Reader b) -> result<sandbox_usage> {
      sandbox_usage x;
      x.sampled_at_ms = b.getSampledAtMs();
      x.cpu_usage_ns = b.getCpuUsageNs();
      x.cpu_used_pct = b.getCpuUsedPct();
      x.memory_bytes = b.getMemoryBytes();
      x.disk_used_bytes = b.getDiskUsedBytes();
      x.processes = b.getProcesses();
      return x;
    });
}

} // namespace airlock::schema
