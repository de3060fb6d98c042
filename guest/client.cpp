#include "guest/client.hpp"

#include "guest/client_internal.hpp"

#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace airlock::guest {

using namespace client_detail;

namespace {

/// Bytes read from the channel per read call.
constexpr size_t read_chunk_bytes = size_t{256} * 1024;
/// Room for the envelope when a payload is cut to fit a frame.
constexpr size_t envelope_bytes = 1024;

int64_t now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

/// The stream a message is about, 0 when none.
uint32_t stream_of(const guest_message& m) {
  if (auto* s = std::get_if<started>(&m))
    return s->stream_id;
  if (auto* o = std::get_if<output_chunk>(&m))
    return o->stream_id;
  if (auto* e = std::get_if<exited>(&m))
    return e->stream_id;
  if (auto* r = std::get_if<error_reply>(&m))
    return r->stream_id;
  return 0;
}

} // namespace

guest_client::guest_client(unique_fd channel, client_options options)
    : channel_(std::move(channel)), options_(options), inbound_(options.frame_bytes_max) {
  int flags = ::fcntl(channel_.get(), F_GETFL);
  if (flags >= 0)
    ::fcntl(channel_.get(), F_SETFL, flags | O_NONBLOCK);
}

// ---- the channel ----------------------------------------------------------------

status guest_client::send(const host_message& message, int timeout_ms) {
  encode_buffer_.clear();
  append_frame(encode_buffer_, message);
  return write_all(encode_buffer_, now_ms() + timeout_ms);
}

status guest_client::send_raw(std::string_view bytes, int timeout_ms) {
  return write_all(bytes, now_ms() + timeout_ms);
}

status guest_client::write_all(std::string_view bytes, int64_t deadline_ms) {
  while (!bytes.empty()) {
    if (closed_)
      return make_status(errc::unavailable, "the guest closed the channel");
    auto n = ::write(channel_.get(), bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return make_status(errc::unavailable, std::string("write to the guest: ") + strerror(errno));
    if (now_ms() >= deadline_ms)
      return make_status(errc::timeout, "the guest did not take our bytes in time");
    // Read while we wait, or a guest blocked on writing to us never reads us.
    pollfd p{channel_.get(), POLLIN | POLLOUT, 0};
    ::poll(&p, 1, remaining_ms(deadline_ms));
    if (p.revents & (POLLIN | POLLHUP | POLLERR))
      if (auto read = read_available(); !read.is_ok())
        return read;
  }
  return status::ok();
}

status guest_client::read_available() {
  read_buffer_.resize(read_chunk_bytes);
  for (;;) {
    auto n = ::read(channel_.get(), read_buffer_.data(), read_buffer_.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return status::ok();
    if (n <= 0) {
      closed_ = true;
      return status::ok(); // what was queued is still delivered; then unavailable
    }
    if (auto fed = inbound_.feed({read_buffer_.data(), static_cast<size_t>(n)}); !fed.is_ok())
      return fed;
    while (auto frame = inbound_.next()) {
      auto message = decode_guest_message(*frame);
      if (!message)
        return message.error();
      account(*message);
      if (std::holds_alternative<credit_grant>(*message))
        continue;
      if (pending_.size() >= options_.pending_events_max)
        return make_status(errc::resource_exhausted, "too many guest events queued");
      pending_.push_back(std::move(*message));
    }
  }
}

status guest_client::receive(int64_t deadline_ms) {
  auto queued = pending_.size();
  for (;;) {
    if (auto read = read_available(); !read.is_ok())
      return read;
    if (pending_.size() > queued)
      return status::ok();
    if (closed_)
      return make_status(errc::unavailable, "the guest closed the channel");
    auto wait = remaining_ms(deadline_ms);
    if (wait == 0)
      return make_status(errc::timeout, "no message from the guest in time");
    pollfd p{channel_.get(), POLLIN, 0};
    ::poll(&p, 1, wait);
  }
}

void guest_client::account(const guest_message& message) {
  if (auto* credit = std::get_if<credit_grant>(&message)) {
    auto it = streams_.find(credit->stream_id);
    if (it != streams_.end())
      it->second.stdin_credit += credit->bytes;
    return;
  }
  bool ended = std::holds_alternative<exited>(message);
  if (auto* e = std::get_if<error_reply>(&message))
    ended = e->ended && e->stream_id != 0;
  if (ended)
    streams_.erase(stream_of(message));
}

void guest_client::consume(const guest_message& message) {
  auto* out = std::get_if<output_chunk>(&message);
  if (out == nullptr)
    return;
  output_delivered_ += out->bytes.size();
  if (!options_.auto_credit)
    return;
  auto it = streams_.find(out->stream_id);
  if (it == streams_.end()) {
    // A stream of an earlier session: a process that a VM restored from
    // memory kept running (a base's start_cmd, say). No caller here reads
    // it, so its output is granted back as it arrives: the process must
    // not block on a window nobody would refill.
    if (!out->bytes.empty())
      (void)send(credit_grant{out->stream_id, static_cast<uint32_t>(out->bytes.size())});
    return;
  }
  it->second.consumed += out->bytes.size();
  grant_consumed(out->stream_id, it->second);
}

void guest_client::grant_consumed(uint32_t stream, stream_credit& s) {
  const uint64_t room = s.granted_max > s.granted ? s.granted_max - s.granted : 0;
  const uint64_t bytes = std::min({s.consumed, room, uint64_t{UINT32_MAX}});
  // Batches: one credit message per quarter window, not per chunk; under a
  // cap, whatever room there is (the caller raises the cap in steps).
  if (bytes == 0 || (bytes < std::max<uint64_t>(s.window / 4, 1) && bytes != room))
    return;
  s.consumed -= bytes;
  s.granted += bytes;
  // A broken channel shows on the next read.
  (void)send(credit_grant{stream, static_cast<uint32_t>(bytes)});
}

status guest_client::limit_output(uint32_t stream, uint64_t end_max) {
  auto it = streams_.find(stream);
  if (it == streams_.end())
    return status::ok();
  auto& s = it->second;
  // The guest may send its window before any grant: the cap on grants is
  // end_max minus the window.
  s.granted_max =
    end_max == no_output_limit ? no_output_limit : (end_max > s.window ? end_max - s.window : 0);
  grant_consumed(stream, s);
  return status::ok();
}

result<guest_message> guest_client::next_event(int timeout_ms) {
  if (pending_.empty())
    if (auto received = receive(now_ms() + timeout_ms); !received.is_ok())
      return received;
  auto message = std::move(pending_.front());
  pending_.pop_front();
  consume(message);
  return message;
}

result<hello> guest_client::handshake(int timeout_ms) {
  auto message = wait_for([](const guest_message& m) { return std::holds_alternative<hello>(m); },
                          now_ms() + timeout_ms);
  if (!message)
    return message.error();
  hello_ = std::get<hello>(*message);
  if (hello_.protocol_version != protocol_version)
    return make_status(errc::unsupported_version,
                       "the guest speaks protocol " + std::to_string(hello_.protocol_version));
  return hello_;
}

// ---- processes -----------------------------------------------------------------

result<uint32_t> guest_client::start(start_request request, int timeout_ms) {
  if (request.stream_id == 0) {
    do {
      request.stream_id = ++last_stream_id_;
    } while (request.stream_id == 0 || streams_.count(request.stream_id) != 0);
  }
  stream_credit credit;
  auto& limits = hello_.limits;
  credit.window = request.window_bytes == 0
                    ? limits.window_bytes
                    : std::min(request.window_bytes, limits.window_bytes_max);
  credit.stdin_credit = request.process.stdin_open ? limits.stdin_window_bytes : 0;
  streams_[request.stream_id] = credit;
  auto id = request.stream_id;
  if (auto sent = send(std::move(request), timeout_ms); !sent.is_ok())
    return sent;
  return id;
}

status guest_client::write_stdin(uint32_t stream, std::string_view bytes, int timeout_ms) {
  auto deadline = now_ms() + timeout_ms;
  size_t chunk_max =
    std::max<size_t>(hello_.limits.frame_bytes_max, 2 * envelope_bytes) - envelope_bytes;
  while (!bytes.empty()) {
    auto it = streams_.find(stream);
    if (it == streams_.end())
      return make_status(errc::not_found, "stream " + std::to_string(stream) + " is not open");
    if (it->second.stdin_credit == 0) {
      if (auto received = receive(deadline); !received.is_ok())
        return received;
      continue;
    }
    auto n = std::min<size_t>({bytes.size(), it->second.stdin_credit, chunk_max});
    it->second.stdin_credit -= n;
    if (auto sent =
          send(stdin_data{stream, std::string(bytes.substr(0, n))}, remaining_ms(deadline));
        !sent.is_ok())
      return sent;
    bytes.remove_prefix(n);
  }
  return status::ok();
}

status guest_client::close_stdin(uint32_t stream, int timeout_ms) {
  return send(guest::close_stdin{stream}, timeout_ms);
}

status guest_client::signal(uint32_t stream, int signo, bool group, int timeout_ms) {
  return send(signal_request{stream, signo, group}, timeout_ms);
}

status guest_client::resize(uint32_t stream, uint16_t rows, uint16_t cols, int timeout_ms) {
  return send(resize_request{stream, rows, cols}, timeout_ms);
}

status guest_client::grant(uint32_t stream, uint32_t bytes, int timeout_ms) {
  return send(credit_grant{stream, bytes}, timeout_ms);
}

result<run_result> guest_client::run(start_request request, std::string_view input,
                                     int timeout_ms) {
  auto deadline = now_ms() + timeout_ms;
  bool close_after = request.process.stdin_open;
  auto id = start(std::move(request), timeout_ms);
  if (!id)
    return id.error();
  if (!input.empty())
    if (auto wrote = write_stdin(*id, input, remaining_ms(deadline)); !wrote.is_ok())
      return wrote;
  if (close_after)
    if (auto closed = close_stdin(*id, remaining_ms(deadline)); !closed.is_ok())
      return closed;
  run_result outcome;
  auto mine = [id = *id](const guest_message& m) { return stream_of(m) == id; };
  for (;;) {
    auto message = wait_for(mine, deadline);
    if (!message)
      return message.error();
    consume(*message);
    if (auto* out = std::get_if<output_chunk>(&*message))
      (out->fd == 2 ? outcome.err : outcome.out) += out->bytes;
    else if (auto* e = std::get_if<exited>(&*message))
      return run_result{e->exit_code, e->signal, std::move(outcome.out), std::move(outcome.err)};
    else if (auto* failure = std::get_if<error_reply>(&*message); failure && failure->ended)
      return as_status(*failure);
  }
}

result<exited> guest_client::run_discarding(start_request request, int timeout_ms) {
  auto deadline = now_ms() + timeout_ms;
  request.process.stdin_open = false;
  auto id = start(std::move(request), timeout_ms);
  if (!id)
    return id.error();
  auto mine = [id = *id](const guest_message& m) { return stream_of(m) == id; };
  for (;;) {
    auto message = wait_for(mine, deadline);
    if (!message)
      return message.error();
    consume(*message);
    if (auto* e = std::get_if<exited>(&*message))
      return *e;
    if (auto* failure = std::get_if<error_reply>(&*message); failure && failure->ended)
      return as_status(*failure);
  }
}

// ---- diagnostics ---------------------------------------------------------------

result<guest_message> guest_client::reply_to(uint32_t request_id, int64_t deadline_ms) {
  auto message = wait_for(
    [request_id](const guest_message& m) { return request_of(m) == request_id; }, deadline_ms);
  if (message)
    if (auto* e = std::get_if<error_reply>(&*message))
      return as_status(*e);
  return message;
}

result<stats_reply> guest_client::stats(int timeout_ms) {
  auto id = next_request_id();
  if (auto sent = send(stats_request{id}, timeout_ms); !sent.is_ok())
    return sent;
  auto message = wait_for(
    [id](const guest_message& m) {
      return std::holds_alternative<stats_reply>(m) && request_of(m) == id;
    },
    now_ms() + timeout_ms);
  if (!message)
    return message.error();
  return std::get<stats_reply>(*message);
}

result<refreshed> guest_client::refresh(std::string entropy, int64_t realtime_ns,
                                        std::string hostname, std::string network, int timeout_ms) {
  const int64_t deadline = now_ms() + timeout_ms;
  auto id = next_request_id();
  if (auto sent = send(refresh_request{id, std::move(entropy), realtime_ns, std::move(hostname),
                                       std::move(network)},
                       timeout_ms);
      !sent.is_ok())
    return sent;
  auto message = reply_to(id, deadline);
  if (!message)
    return message.error();
  auto done = std::get<refreshed>(*message);
  last_stream_id_ = std::max(last_stream_id_, done.stream_id_max);
  if (auto greeted = handshake(static_cast<int>(std::max<int64_t>(1, deadline - now_ms())));
      !greeted)
    return greeted.error();
  return done;
}

result<int64_t> guest_client::ping(int timeout_ms) {
  auto nonce = ++last_nonce_;
  auto started_us = now_us();
  if (auto sent = send(ping_request{nonce}, timeout_ms); !sent.is_ok())
    return sent;
  auto message = wait_for(
    [nonce](const guest_message& m) {
      auto* p = std::get_if<pong>(&m);
      return p != nullptr && p->nonce == nonce;
    },
    now_ms() + timeout_ms);
  if (!message)
    return message.error();
  return now_us() - started_us;
}

} // namespace airlock::guest
