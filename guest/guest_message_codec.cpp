// Guest -> host messages: the encoding the agent sends (with its hot path
// for output) and the decoding guest_client reads.

#include <capnp/message.h>

#include "guest/protocol_codec.hpp"

namespace airlock::guest {

namespace {

using namespace codec;

void fill(cs::GuestLimits::Builder b, const limits_info& l) {
  b.setFrameBytesMax(l.frame_bytes_max);
  b.setStreamsMax(l.streams_max);
  b.setProcessesMax(l.processes_max);
  b.setPathBytesMax(l.path_bytes_max);
  b.setFileChunkBytes(l.file_chunk_bytes);
  b.setOutputChunkBytes(l.output_chunk_bytes);
  b.setWindowBytes(l.window_bytes);
  b.setWindowBytesMax(l.window_bytes_max);
  b.setStdinWindowBytes(l.stdin_window_bytes);
  b.setListEntriesMax(l.list_entries_max);
}

void fill(cs::GuestFileInfo::Builder b, const file_info& f) {
  b.setName(as_text(f.name));
  b.setType(static_cast<cs::GuestFileType>(f.type));
  b.setSize(f.size);
  b.setMode(f.mode);
  b.setUid(f.uid);
  b.setGid(f.gid);
  b.setMtimeNs(f.mtime_ns);
  b.setOwner(as_text(f.owner));
  b.setGroup(as_text(f.group));
  b.setSymlinkTarget(as_text(f.symlink_target));
}

void fill(cs::GuestStats::Builder b, const stats_reply& m) {
  b.setRequestId(m.request_id);
  b.setProcessesStarted(m.processes_started);
  b.setProcessesRunning(m.processes_running);
  b.setReapedTotal(m.reaped_total);
  b.setOrphansReaped(m.orphans_reaped);
  b.setOpenStreams(m.open_streams);
  b.setOutboundBytes(m.outbound_bytes);
  b.setOutboundBytesMax(m.outbound_bytes_max);
  b.setStreamBufferedBytesMax(m.stream_buffered_bytes_max);
  b.setFramesReceived(m.frames_received);
  b.setFramesSent(m.frames_sent);
}

void fill(cs::GuestExited::Builder b, const exited& m) {
  b.setStreamId(m.stream_id);
  b.setExitCode(m.exit_code);
  b.setSignal(m.signal);
  b.setStdoutBytes(m.stdout_bytes);
  b.setStderrBytes(m.stderr_bytes);
  b.setBufferedBytesMax(m.buffered_bytes_max);
}

struct guest_filler {
  cs::GuestToHost::Builder b;
  void operator()(const hello& m) {
    auto s = b.initHello();
    s.setProtocolVersion(m.protocol_version);
    fill(s.initLimits(), m.limits);
    s.setPid(m.pid);
    s.setAgentVersion(as_text(m.agent_version));
  }
  void operator()(const started& m) {
    auto s = b.initStarted();
    s.setStreamId(m.stream_id);
    s.setPid(m.pid);
    s.setPtyPath(as_text(m.pty_path));
  }
  void operator()(const output_chunk& m) {
    auto s = b.initOutput();
    s.setStreamId(m.stream_id);
    s.setFd(m.fd);
    s.setSequence(m.sequence);
    s.setOffset(m.offset);
    s.setBytes(as_data(m.bytes));
  }
  void operator()(const exited& m) { fill(b.initExited(), m); }
  void operator()(const credit_grant& m) {
    auto s = b.initStdinCredit();
    s.setStreamId(m.stream_id);
    s.setBytes(m.bytes);
  }
  void operator()(const file_data& m) {
    auto s = b.initFileData();
    s.setRequestId(m.request_id);
    s.setOffset(m.offset);
    s.setBytes(as_data(m.bytes));
    s.setEof(m.eof);
  }
  void operator()(const file_stat& m) {
    auto s = b.initFileStat();
    s.setRequestId(m.request_id);
    fill(s.initInfo(), m.info);
  }
  void operator()(const file_list& m) {
    auto s = b.initFileList();
    s.setRequestId(m.request_id);
    auto entries = s.initEntries(static_cast<unsigned>(m.entries.size()));
    for (unsigned i = 0; i < m.entries.size(); ++i)
      fill(entries[i], m.entries[i]);
    s.setTruncated(m.truncated);
  }
  void operator()(const file_done& m) {
    auto s = b.initFileDone();
    s.setRequestId(m.request_id);
    s.setBytes(m.bytes);
  }
  void operator()(const error_reply& m) {
    auto s = b.initError();
    s.setStreamId(m.stream_id);
    s.setRequestId(m.request_id);
    auto code = airlock::to_string(m.code);
    s.setCode(capnp::Text::Reader(code.data(), code.size()));
    s.setMessage(as_text(m.message));
    s.setEnded(m.ended);
    s.setWatchId(m.watch_id);
  }
  void operator()(const pong& m) { b.initPong().setNonce(m.nonce); }
  void operator()(const refreshed& m) {
    auto s = b.initRefreshed();
    s.setRequestId(m.request_id);
    s.setClockStepNs(m.clock_step_ns);
    s.setStreamIdMax(m.stream_id_max);
  }
  void operator()(const stats_reply& m) { fill(b.initStats(), m); }
  void operator()(const watch_started& m) {
    auto s = b.initWatchStarted();
    s.setWatchId(m.watch_id);
    s.setDirectories(m.directories);
  }
  void operator()(const watch_events& m) {
    auto s = b.initWatchEvents();
    s.setWatchId(m.watch_id);
    auto events = s.initEvents(static_cast<unsigned>(m.events.size()));
    for (unsigned i = 0; i < m.events.size(); ++i) {
      events[i].setName(as_text(m.events[i].name));
      events[i].setKind(static_cast<cs::GuestWatchKind>(m.events[i].kind));
    }
  }
};

size_t payload_hint(const guest_message& m) {
  if (auto* o = std::get_if<output_chunk>(&m))
    return o->bytes.size();
  if (auto* d = std::get_if<file_data>(&m))
    return d->bytes.size();
  if (auto* l = std::get_if<file_list>(&m))
    return l->entries.size() * 96;
  if (auto* w = std::get_if<watch_events>(&m)) {
    size_t bytes = 0;
    for (const auto& e : w->events)
      bytes += e.name.size() + 32;
    return bytes;
  }
  return 0;
}

watch_events read(cs::GuestWatchEvents::Reader r) {
  watch_events m;
  m.watch_id = r.getWatchId();
  for (auto e : r.getEvents()) {
    auto kind = static_cast<uint16_t>(e.getKind());
    // A kind newer than this build reads as a write: something changed.
    m.events.push_back({to_string(e.getName()), kind <= static_cast<uint16_t>(watch_kind::chmod)
                                                  ? static_cast<watch_kind>(kind)
                                                  : watch_kind::write});
  }
  return m;
}

limits_info read(cs::GuestLimits::Reader r) {
  limits_info l;
  l.frame_bytes_max = r.getFrameBytesMax();
  l.streams_max = r.getStreamsMax();
  l.processes_max = r.getProcessesMax();
  l.path_bytes_max = r.getPathBytesMax();
  l.file_chunk_bytes = r.getFileChunkBytes();
  l.output_chunk_bytes = r.getOutputChunkBytes();
  l.window_bytes = r.getWindowBytes();
  l.window_bytes_max = r.getWindowBytesMax();
  l.stdin_window_bytes = r.getStdinWindowBytes();
  l.list_entries_max = r.getListEntriesMax();
  return l;
}

file_info read(cs::GuestFileInfo::Reader r) {
  file_info f;
  f.name = to_string(r.getName());
  auto type = static_cast<uint16_t>(r.getType());
  f.type = type <= static_cast<uint16_t>(file_type::symlink) ? static_cast<file_type>(type)
                                                             : file_type::other;
  f.size = r.getSize();
  f.mode = r.getMode();
  f.uid = r.getUid();
  f.gid = r.getGid();
  f.mtime_ns = r.getMtimeNs();
  f.owner = to_string(r.getOwner());
  f.group = to_string(r.getGroup());
  f.symlink_target = to_string(r.getSymlinkTarget());
  return f;
}

stats_reply read(cs::GuestStats::Reader r) {
  stats_reply m;
  m.request_id = r.getRequestId();
  m.processes_started = r.getProcessesStarted();
  m.processes_running = r.getProcessesRunning();
  m.reaped_total = r.getReapedTotal();
  m.orphans_reaped = r.getOrphansReaped();
  m.open_streams = r.getOpenStreams();
  m.outbound_bytes = r.getOutboundBytes();
  m.outbound_bytes_max = r.getOutboundBytesMax();
  m.stream_buffered_bytes_max = r.getStreamBufferedBytesMax();
  m.frames_received = r.getFramesReceived();
  m.frames_sent = r.getFramesSent();
  return m;
}

exited read(cs::GuestExited::Reader r) {
  return exited{r.getStreamId(),    r.getExitCode(),    r.getSignal(),
                r.getStdoutBytes(), r.getStderrBytes(), r.getBufferedBytesMax()};
}

file_list read(cs::GuestFileList::Reader r) {
  file_list m;
  m.request_id = r.getRequestId();
  for (auto entry : r.getEntries())
    m.entries.push_back(read(entry));
  m.truncated = r.getTruncated();
  return m;
}

result<guest_message> read(cs::GuestToHost::Reader r) {
  using which = cs::GuestToHost::Which;
  switch (r.which()) {
    case which::HELLO: {
      auto s = r.getHello();
      return guest_message{hello{s.getProtocolVersion(), read(s.getLimits()), s.getPid(),
                                 to_string(s.getAgentVersion())}};
    }
    case which::STARTED: {
      auto s = r.getStarted();
      return guest_message{started{s.getStreamId(), s.getPid(), to_string(s.getPtyPath())}};
    }
    case which::OUTPUT: {
      auto s = r.getOutput();
      return guest_message{output_chunk{s.getStreamId(), s.getFd(), s.getSequence(), s.getOffset(),
                                        to_string(s.getBytes())}};
    }
    case which::EXITED: return guest_message{read(r.getExited())};
    case which::STDIN_CREDIT: {
      auto s = r.getStdinCredit();
      return guest_message{credit_grant{s.getStreamId(), s.getBytes()}};
    }
    case which::FILE_DATA: {
      auto s = r.getFileData();
      return guest_message{
        file_data{s.getRequestId(), s.getOffset(), to_string(s.getBytes()), s.getEof()}};
    }
    case which::FILE_STAT: {
      auto s = r.getFileStat();
      return guest_message{file_stat{s.getRequestId(), read(s.getInfo())}};
    }
    case which::FILE_LIST: return guest_message{read(r.getFileList())};
    case which::FILE_DONE: {
      auto s = r.getFileDone();
      return guest_message{file_done{s.getRequestId(), s.getBytes()}};
    }
    case which::ERROR: {
      auto s = r.getError();
      return guest_message{error_reply{s.getStreamId(), s.getRequestId(),
                                       errc_from_string(to_string(s.getCode())),
                                       to_string(s.getMessage()), s.getEnded(), s.getWatchId()}};
    }
    case which::PONG: return guest_message{pong{r.getPong().getNonce()}};
    case which::STATS: return guest_message{read(r.getStats())};
    case which::WATCH_STARTED: {
      auto s = r.getWatchStarted();
      return guest_message{watch_started{s.getWatchId(), s.getDirectories()}};
    }
    case which::WATCH_EVENTS: return guest_message{read(r.getWatchEvents())};
    case which::REFRESHED: {
      auto s = r.getRefreshed();
      return guest_message{refreshed{s.getRequestId(), s.getClockStepNs(), s.getStreamIdMax()}};
    }
  }
  return make_status(errc::unsupported_version, "guest message kind "
                                                  + std::to_string(static_cast<int>(r.which()))
                                                  + " is newer than this host");
}

} // namespace

void append_frame(std::string& out, const guest_message& message) {
  capnp::MallocMessageBuilder builder(first_segment_words(payload_hint(message)));
  build<cs::GuestToHost, guest_filler>(builder, message);
  append_builder(out, builder);
}

void append_output_frame(std::string& out, uint32_t stream_id, uint8_t fd, uint64_t sequence,
                         uint64_t offset, std::string_view bytes) {
  capnp::MallocMessageBuilder builder(first_segment_words(bytes.size()));
  auto root = builder.initRoot<cs::GuestToHost>();
  root.setSchemaVersion(protocol_version);
  auto s = root.initOutput();
  s.setStreamId(stream_id);
  s.setFd(fd);
  s.setSequence(sequence);
  s.setOffset(offset);
  s.setBytes(as_data(bytes));
  append_builder(out, builder);
}

std::string encode_payload(const guest_message& message) {
  capnp::MallocMessageBuilder builder(first_segment_words(payload_hint(message)));
  build<cs::GuestToHost, guest_filler>(builder, message);
  return schema::detail::flat_bytes(builder);
}

std::string_view to_string(watch_kind kind) noexcept {
  switch (kind) {
    case watch_kind::create: return "create";
    case watch_kind::write: return "write";
    case watch_kind::remove: return "remove";
    case watch_kind::rename: return "rename";
    case watch_kind::chmod: return "chmod";
  }
  return "write";
}

result<guest_message> decode_guest_message(std::string_view payload) {
  return codec::decode<cs::GuestToHost, guest_message>(
    payload, "guest", [](cs::GuestToHost::Reader root) { return read(root); });
}

} // namespace airlock::guest
