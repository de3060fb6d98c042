// Host -> guest messages: the encoding guest_client sends and the decoding
// the agent reads. The start_request body is in start_request_codec.cpp.

#include <capnp/message.h>

#include "guest/protocol_codec.hpp"

namespace airlock::guest {

namespace {

using namespace codec;

struct host_filler {
  cs::HostToGuest::Builder b;
  void operator()(const start_request& m) { codec::fill(b.initStart(), m); }
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
  void operator()(const watch_start& m) {
    auto s = b.initWatchStart();
    s.setWatchId(m.watch_id);
    s.setPath(as_text(m.path));
    s.setRecursive(m.recursive);
  }
  void operator()(const watch_stop& m) { b.initWatchStop().setWatchId(m.watch_id); }
  void operator()(const refresh_request& m) {
    auto s = b.initRefresh();
    s.setRequestId(m.request_id);
    s.setEntropy(as_data(m.entropy));
    s.setRealtimeNs(m.realtime_ns);
    s.setHostname(as_text(m.hostname));
    s.setNetwork(as_text(m.network));
  }
};

size_t payload_hint(const host_message& m) {
  if (auto* s = std::get_if<stdin_data>(&m))
    return s->bytes.size();
  if (auto* w = std::get_if<write_chunk>(&m))
    return w->bytes.size();
  return 0;
}

result<host_message> read(cs::HostToGuest::Reader r) {
  using which = cs::HostToGuest::Which;
  switch (r.which()) {
    case which::START: return host_message{codec::read(r.getStart())};
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
    case which::WATCH_START: {
      auto s = r.getWatchStart();
      return host_message{watch_start{s.getWatchId(), to_string(s.getPath()), s.getRecursive()}};
    }
    case which::WATCH_STOP: return host_message{watch_stop{r.getWatchStop().getWatchId()}};
    case which::REFRESH: {
      auto s = r.getRefresh();
      return host_message{refresh_request{s.getRequestId(), to_string(s.getEntropy()),
                                          s.getRealtimeNs(), to_string(s.getHostname()),
                                          to_string(s.getNetwork())}};
    }
  }
  return make_status(errc::unsupported_version, "host message kind "
                                                  + std::to_string(static_cast<int>(r.which()))
                                                  + " is newer than this guest");
}

} // namespace

void append_frame(std::string& out, const host_message& message) {
  capnp::MallocMessageBuilder builder(first_segment_words(payload_hint(message)));
  build<cs::HostToGuest, host_filler>(builder, message);
  append_builder(out, builder);
}

std::string encode_payload(const host_message& message) {
  capnp::MallocMessageBuilder builder(first_segment_words(payload_hint(message)));
  build<cs::HostToGuest, host_filler>(builder, message);
  return schema::detail::flat_bytes(builder);
}

result<host_message> decode_host_message(std::string_view payload) {
  return codec::decode<cs::HostToGuest, host_message>(
    payload, "host", [](cs::HostToGuest::Reader root) { return read(root); });
}

} // namespace airlock::guest
