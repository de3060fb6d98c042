// The start_request <-> GuestStart codec, on its own: the one translation of
// the process request (schema::exec_spec) into the guest's start message, and
// back in the agent.

#include "guest/protocol_codec.hpp"

namespace airlock::guest::codec {

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

} // namespace airlock::guest::codec
