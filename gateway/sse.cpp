#include "gateway/sse.hpp"

#include <utility>

#include <nlohmann/json.hpp>

namespace airlock::gateway {

namespace {

/// `text` without CR and LF: an event name or id must stay on its line.
std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c != '\r' && c != '\n')
      out += c;
  }
  return out;
}

constexpr std::string_view heartbeat_comment = ": heartbeat\n\n";

} // namespace

std::string format_sse_event(std::string_view event, std::string_view data, std::string_view id) {
  std::string out;
  out.reserve(event.size() + data.size() + id.size() + 32);
  if (!event.empty())
    out.append("event: ").append(one_line(event)).append("\n");
  if (!id.empty())
    out.append("id: ").append(one_line(id)).append("\n");
  // SSE ends a line at CRLF, CR or LF; each line becomes its own data: field.
  for (;;) {
    size_t brk = data.find_first_of("\r\n");
    out.append("data: ").append(data.substr(0, brk)).append("\n");
    if (brk == std::string_view::npos)
      break;
    size_t skip = (data[brk] == '\r' && brk + 1 < data.size() && data[brk + 1] == '\n') ? 2 : 1;
    data.remove_prefix(brk + skip);
  }
  out += '\n';
  return out;
}

sse_stream::sse_stream(const sse_options& options, std::weak_ptr<detail::sse_writer> writer,
                       stream_body body)
    : options_(options), writer_(std::move(writer)), body_(body) {}

void sse_stream::wake() const {
  if (auto writer = writer_.lock())
    writer->wake();
}

bool sse_stream::send(std::string_view event, std::string_view data, std::string_view id) {
  if (body_ != stream_body::events)
    return false;
  return enqueue(format_sse_event(event, data, id));
}

bool sse_stream::send_bytes(std::string_view bytes) {
  if (body_ != stream_body::bytes)
    return false;
  return enqueue(std::string(bytes));
}

bool sse_stream::enqueue(std::string bytes) {
  bool queued = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closed_)
      return false;
    size_t events = queued_events_ + inflight_events_ + 1;
    size_t total = queued_.size() + inflight_bytes_ + bytes.size();
    if (events <= options_.queue_events_max && total <= options_.queue_bytes_max) {
      queued_ += bytes;
      ++queued_events_;
      queued = true;
    } else {
      // Drop the client: what is queued will not reach it in time anyway;
      // the error event tells it why, if it ever reads again. A byte body
      // has no room for one: it just ends short.
      queued_.clear();
      queued_events_ = 0;
      if (body_ == stream_body::events) {
        nlohmann::json error{{"code", "slow_consumer"},
                             {"message", "the client read events slower than they were produced; "
                                         "reconnect to resume"}};
        queued_ = format_sse_event("error", error.dump(), {});
        queued_events_ = 1;
      }
      closed_ = true;
      dropped_ = true;
      end_requested_ = true;
      end_reason_ = "slow_consumer";
      drained_ = nullptr;
    }
  }
  wake();
  return queued;
}

void sse_stream::when_drained(std::function<void()> ready) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closed_)
      return;
    drained_ = std::move(ready);
  }
  wake();
}

void sse_stream::close() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closed_)
      return;
    closed_ = true;
    end_requested_ = true;
    end_reason_ = "closed";
    drained_ = nullptr;
  }
  wake();
}

void sse_stream::on_close(std::function<void(std::string_view reason)> done) {
  std::string reason;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!finished_) {
      on_close_ = std::move(done);
      return;
    }
    reason = end_reason_;
  }
  if (done)
    done(reason);
}

bool sse_stream::closed() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return closed_;
}

sse_stream::writer_step sse_stream::next_step() {
  std::lock_guard<std::mutex> guard(mutex_);
  writer_step step;
  if (dropped_ && !finished_)
    step.finish_slow_consumer = true;
  if (writing_)
    return step;
  if (!queued_.empty()) {
    step.bytes = std::move(queued_);
    queued_.clear();
    step.events = queued_events_;
    inflight_bytes_ = step.bytes.size();
    inflight_events_ = queued_events_;
    queued_events_ = 0;
    writing_ = true;
    return step;
  }
  if (end_requested_) {
    step.end = true;
    step.end_reason = end_reason_;
    return step;
  }
  if (drained_)
    step.drained = std::exchange(drained_, nullptr);
  return step;
}

void sse_stream::write_done() {
  std::lock_guard<std::mutex> guard(mutex_);
  writing_ = false;
  inflight_bytes_ = 0;
  inflight_events_ = 0;
}

bool sse_stream::queue_heartbeat() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (writing_ || !queued_.empty() || end_requested_)
    return false;
  if (body_ == stream_body::events)
    queued_ = heartbeat_comment;
  else if (!options_.heartbeat_bytes.empty())
    queued_ = options_.heartbeat_bytes;
  else
    return false;
  return true;
}

void sse_stream::finish(std::string_view reason) {
  std::function<void(std::string_view)> done;
  std::string first_reason;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (finished_)
      return;
    finished_ = true;
    closed_ = true;
    if (!end_requested_ || end_reason_.empty())
      end_reason_ = std::string(reason);
    end_requested_ = true;
    drained_ = nullptr;
    done = std::move(on_close_);
    on_close_ = nullptr;
    first_reason = end_reason_;
  }
  if (done)
    done(first_reason);
}

} // namespace airlock::gateway
