// The start_request <-> GuestStart codec, on its own: the process request is
// the part of the guest protocol most likely to change.

#include "guest/protocol_codec.hpp"

namespace airlock::guest::codec {

void fill(cs::GuestStart::Builder b, const start_request& m) {
  b.setStreamId(m.stream_id);
  // Every byte travels, NULs included: the agent decides what to refuse.
  schema::detail::fill_texts(b.initArgv(schema::detail::count(m.argv.size())), m.argv, as_text);
  b.setShell(as_text(m.shell));
  schema::detail::fill_pairs(b.initEnv(schema::detail::count(m.env.size())), m.env, as_text);
  b.setCwd(as_text(m.cwd));
  b.setSetUser(m.set_user);
  b.setUid(m.uid);
  b.setGid(m.gid);
  b.setPty(m.pty);
  b.setRows(m.rows);
  b.setCols(m.cols);
  b.setStdin(m.stdin_open);
  b.setWindowBytes(m.window_bytes);
}

start_request read(cs::GuestStart::Reader r) {
  start_request m;
  m.stream_id = r.getStreamId();
  m.argv = schema::detail::read_texts(r.getArgv());
  m.shell = to_string(r.getShell());
  m.env = schema::detail::read_pairs<decltype(m.env)>(r.getEnv());
  m.cwd = to_string(r.getCwd());
  m.set_user = r.getSetUser();
  m.uid = r.getUid();
  m.gid = r.getGid();
  m.pty = r.getPty();
  m.rows = r.getRows();
  m.cols = r.getCols();
  m.stdin_open = r.getStdin();
  m.window_bytes = r.getWindowBytes();
  return m;
}

} // namespace airlock::guest::codec
