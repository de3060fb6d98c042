#include "guest/protocol.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <cstring>

#include "schema/capnp_codec.hpp"
#include "schema/guest.capnp.h"

namespace airlock::guest {

namespace {

namespace cs = airlock::capnp_schema;

/// Bounds what a decoder walks, whatever a frame claims.
constexpr uint64_t decode_traversal_words_max = uint64_t{4} * 1024 * 1024;
constexpr int decode_nesting_max = 16;
constexpr errc last_errc = errc::too_large;

/// Appends to a std::string so that a message is serialized once, in place.
class string_output final : public kj::OutputStream {
public:
  explicit string_output(std::string& out) : out_(out) {}
  void write(const void* buffer, size_t size) override {
    out_.append(static_cast<const char*>(buffer), size);
  }

private:
  std::string& out_;
};

void append_builder(std::string& out, capnp::MessageBuilder& builder) {
  auto bytes = capnp::computeSerializedSizeInWords(builder) * sizeof(capnp::word);
  auto n = static_cast<uint32_t>(bytes);
  for (int shift = 0; shift < 32; shift += 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  string_output stream(out);
  capnp::writeMessage(stream, builder);
}

using schema::detail::as_data;

capnp::Text::Reader as_text(const std::string& text) { return {text.data(), text.size()}; }

std::string to_string(capnp::Text::Reader text) { return schema::detail::text(text); }

std::string to_string(capnp::Data::Reader data) { return schema::detail::data(data); }

// ---- host -> guest: encode ----------------------------------------------------

/// The one translation of the process request into the guest's start message.
void fill(cs::GuestStart::Builder b, const start_request& m) {
  const auto& p = m.process;
  b.setStreamId(m.stream_id);
  // Every byte travels, NULs included: the agent decides what to refuse.
  schema::detail::fill_texts(b.initArgv(schema::detail::count(p.argv.size())), p.argv, as_text);
  b.setShell(as_text(p.cmd));
  schema::detail::fill_pairs(b.initEnv(schema::detail::count(p.env.size())), p.env, as_text);
  b.setCwd(as_text(p.cwd));
  b.setSetUser(p.run_as.set_user);
  b.setUid(p.run_as.uid);
  b.setGid(p.run_as.gid);
  b.setPty(p.pty);
  b.setRows(p.rows);
  b.setCols(p.cols);
  b.setStdin(p.stdin_open);
  b.setWindowBytes(m.window_bytes);
}

struct host_filler {
  cs::HostToGuest::Builder b;
  void operator()(const start_request& m) { fill(b.initStart(), m); }
  void operator()(const stdin_data& m) {
    auto s = b.initStdin();
    s.setStreamId(m.stream_id);
    s.setBytes(as_data(m.bytes));
  }
  void operator()(const close_stdin& m) { b.initCloseStdin().setStreamId(m.stream_id); }
  void operator()(const signal_request& m) {
    auto s = b.initSignal();
    s.setStreamId(m.stream_id);
    s.setSigno(m.signo);
    s.setGroup(m.group);
  }
  void operator()(const resize_request& m) {
    auto s = b.initResize();
    s.setStreamId(m.stream_id);
    s.setRows(m.rows);
    s.setCols(m.cols);
  }
  void operator()(const credit_grant& m) {
    auto s = b.initCredit();
    s.setStreamId(m.stream_id);
    s.setBytes(m.bytes);
  }
  void operator()(const file_read_request& m) {
    auto s = b.initFileRead();
    s.setRequestId(m.request_id);
    s.setPath(as_text(m.path));
    s.setOffset(m.offset);
    s.setLength(m.length);
  }
  void operator()(const write_begin& m) {
    auto s = b.initWriteBegin();
    s.setRequestId(m.request_id);
    s.setPath(as_text(m.path));
    s.setMode(m.mode);
    s.setCreateParents(m.create_parents);
  }
  void operator()(const write_chunk& m) {
    auto s = b.initWriteChunk();
    s.setRequestId(m.request_id);
    s.setBytes(as_data(m.bytes));
  }
  void operator()(const write_end& m) {
    auto s = b.initWriteEnd();
    s.setRequestId(m.request_id);
    s.setAbort(m.abort);
  }
  void operator()(const list_request& m) {
    auto s = b.initListDir();
    s.setRequestId(m.request_id);
    s.setPath(as_text(m.path));
  }
  void operator()(const stat_request& m) {
    auto s = b.initStat();
    s.setRequestId(m.request_id);
    s.setPath(as_text(m.path));
    s.setFollowSymlinks(m.follow_symlinks);
  }
  void operator()(const mkdir_request& m) {
    auto s = b.initMkdir();
    s.setRequestId(m.request_id);
    s.setPath(as_text(m.path));
    s.setMode(m.mode);
    s.setParents(m.parents);
  }
  void operator()(const remove_request& m) {
    auto s = b.initRemove();
    s.setRequestId(m.request_id);
    s.setPath(as_text(m.path));
    s.setRecursive(m.recursive);
  }
  void operator()(const rename_request& m) {
    auto s = b.initRename();
    s.setRequestId(m.request_id);
    s.setFrom(as_text(m.from));
    s.setTo(as_text(m.to));
  }
  void operator()(const ping_request& m) { b.initPing().setNonce(m.nonce); }
  void operator()(const stats_request& m) { b.initStats().setRequestId(m.request_id); }
};

// ---- guest -> host: encode ----------------------------------------------------

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
  }
  void operator()(const pong& m) { b.initPong().setNonce(m.nonce); }
  void operator()(const stats_reply& m) { fill(b.initStats(), m); }
};

/// Bytes a message will need, so that large payloads land in one segment.
size_t first_segment_words(size_t payload_bytes) {
  return payload_bytes / sizeof(capnp::word) + 64;
}

size_t payload_hint(const host_message& m) {
  if (auto* s = std::get_if<stdin_data>(&m))
    return s->bytes.size();
  if (auto* w = std::get_if<write_chunk>(&m))
    return w->bytes.size();
  return 0;
}

size_t payload_hint(const guest_message& m) {
  if (auto* o = std::get_if<output_chunk>(&m))
    return o->bytes.size();
  if (auto* d = std::get_if<file_data>(&m))
    return d->bytes.size();
  if (auto* l = std::get_if<file_list>(&m))
    return l->entries.size() * 96;
  return 0;
}

template <class Envelope, class Filler, class Message>
void build(capnp::MallocMessageBuilder& builder, const Message& message) {
  auto root = builder.initRoot<Envelope>();
  root.setSchemaVersion(protocol_version);
  std::visit(Filler{root}, message);
}

} // namespace

void append_frame(std::string& out, const host_message& message) {
  capnp::MallocMessageBuilder builder(first_segment_words(payload_hint(message)));
  build<cs::HostToGuest, host_filler>(builder, message);
  append_builder(out, builder);
}

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

std::string encode_payload(const host_message& message) {
  capnp::MallocMessageBuilder builder(first_segment_words(payload_hint(message)));
  build<cs::HostToGuest, host_filler>(builder, message);
  return schema::detail::flat_bytes(builder);
}

std::string encode_payload(const guest_message& message) {
  capnp::MallocMessageBuilder builder(first_segment_words(payload_hint(message)));
  build<cs::GuestToHost, guest_filler>(builder, message);
  return schema::detail::flat_bytes(builder);
}

errc errc_from_string(std::string_view name) noexcept {
  for (auto i = 0; i <= static_cast<int>(last_errc); ++i) {
    auto code = static_cast<errc>(i);
    if (airlock::to_string(code) == name)
      return code;
  }
  return errc::internal;
}

// ---- decode -------------------------------------------------------------------

namespace {

start_request read(cs::GuestStart::Reader r) {
  start_request m;
  auto& p = m.process;
  m.stream_id = r.getStreamId();
  p.argv = schema::detail::read_texts(r.getArgv());
  p.cmd = to_string(r.getShell());
  p.env = schema::detail::read_pairs<decltype(p.env)>(r.getEnv());
  p.cwd = to_string(r.getCwd());
  p.run_as.set_user = r.getSetUser();
  p.run_as.uid = r.getUid();
  p.run_as.gid = r.getGid();
  p.pty = r.getPty();
  p.rows = r.getRows();
  p.cols = r.getCols();
  p.stdin_open = r.getStdin();
  m.window_bytes = r.getWindowBytes();
  return m;
}

result<host_message> read(cs::HostToGuest::Reader r) {
  using which = cs::HostToGuest::Which;
  switch (r.which()) {
    case which::START: return host_message{read(r.getStart())};
    case which::STDIN: {
      auto s = r.getStdin();
      return host_message{stdin_data{s.getStreamId(), to_string(s.getBytes())}};
    }
    case which::CLOSE_STDIN: return host_message{close_stdin{r.getCloseStdin().getStreamId()}};
    case which::SIGNAL: {
      auto s = r.getSignal();
      return host_message{signal_request{s.getStreamId(), s.getSigno(), s.getGroup()}};
    }
    case which::RESIZE: {
      auto s = r.getResize();
      return host_message{resize_request{s.getStreamId(), s.getRows(), s.getCols()}};
    }
    case which::CREDIT: {
      auto s = r.getCredit();
      return host_message{credit_grant{s.getStreamId(), s.getBytes()}};
    }
    case which::FILE_READ: {
      auto s = r.getFileRead();
      return host_message{
        file_read_request{s.getRequestId(), to_string(s.getPath()), s.getOffset(), s.getLength()}};
    }
    case which::WRITE_BEGIN: {
      auto s = r.getWriteBegin();
      return host_message{
        write_begin{s.getRequestId(), to_string(s.getPath()), s.getMode(), s.getCreateParents()}};
    }
    case which::WRITE_CHUNK: {
      auto s = r.getWriteChunk();
      return host_message{write_chunk{s.getRequestId(), to_string(s.getBytes())}};
    }
    case which::WRITE_END: {
      auto s = r.getWriteEnd();
      return host_message{write_end{s.getRequestId(), s.getAbort()}};
    }
    case which::LIST_DIR: {
      auto s = r.getListDir();
      return host_message{list_request{s.getRequestId(), to_string(s.getPath())}};
    }
    case which::STAT: {
      auto s = r.getStat();
      return host_message{
        stat_request{s.getRequestId(), to_string(s.getPath()), s.getFollowSymlinks()}};
    }
    case which::MKDIR: {
      auto s = r.getMkdir();
      return host_message{
        mkdir_request{s.getRequestId(), to_string(s.getPath()), s.getMode(), s.getParents()}};
    }
    case which::REMOVE: {
      auto s = r.getRemove();
      return host_message{
        remove_request{s.getRequestId(), to_string(s.getPath()), s.getRecursive()}};
    }
    case which::RENAME: {
      auto s = r.getRename();
      return host_message{
        rename_request{s.getRequestId(), to_string(s.getFrom()), to_string(s.getTo())}};
    }
    case which::PING: return host_message{ping_request{r.getPing().getNonce()}};
    case which::STATS: return host_message{stats_request{r.getStats().getRequestId()}};
  }
  return make_status(errc::unsupported_version, "host message kind "
                                                  + std::to_string(static_cast<int>(r.which()))
                                                  + " is newer than this guest");
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
                                       to_string(s.getMessage()), s.getEnded()}};
    }
    case which::PONG: return guest_message{pong{r.getPong().getNonce()}};
    case which::STATS: return guest_message{read(r.getStats())};
  }
  return make_status(errc::unsupported_version, "guest message kind "
                                                  + std::to_string(static_cast<int>(r.which()))
                                                  + " is newer than this host");
}

template <class Envelope, class Message>
result<Message> decode(std::string_view payload, std::string_view what) {
  std::string subject = std::string(what) + " frame";
  return schema::detail::read_message<Envelope, Message>(
    payload, subject, {decode_traversal_words_max, decode_nesting_max},
    [&subject](typename Envelope::Reader root) -> result<Message> {
      if (root.getSchemaVersion() == 0)
        return make_status(errc::corrupt_record, subject + " has no version");
      return read(root);
    });
}

} // namespace

result<host_message> decode_host_message(std::string_view payload) {
  return decode<cs::HostToGuest, host_message>(payload, "host");
}

result<guest_message> decode_guest_message(std::string_view payload) {
  return decode<cs::GuestToHost, guest_message>(payload, "guest");
}

} // namespace airlock::guest
