#pragma once
// The test double of detail::exchange_transport: answers an exchange without a
// server or a socket. It records what the exchange delivered, and wait() lets
// a test block until a handler answering from another thread (an actor's
// continuation) has answered.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "gateway/exchange.hpp"
#include "gateway/sse.hpp"

namespace airlock::test {

class recording_transport : public gateway::detail::exchange_transport {
public:
  void deliver(uint64_t sequence, gateway::http_response response) override {
    std::lock_guard lock(mutex_);
    count(sequence);
    last_ = std::move(response);
    answered_ = true;
    changed_.notify_all();
  }

  /// A stream with no writer: what a handler sends goes nowhere.
  std::shared_ptr<gateway::sse_stream> deliver_sse(uint64_t sequence,
                                                   const gateway::sse_options& options) override {
    std::lock_guard lock(mutex_);
    count(sequence);
    return std::make_shared<gateway::sse_stream>(options,
                                                 std::weak_ptr<gateway::detail::sse_writer>{});
  }

  /// Like deliver_sse, for a byte body; `head` is not kept.
  std::shared_ptr<gateway::sse_stream>
  deliver_body_stream(uint64_t sequence, gateway::http_response,
                      const gateway::sse_options& options) override {
    std::lock_guard lock(mutex_);
    count(sequence);
    return std::make_shared<gateway::sse_stream>(
      options, std::weak_ptr<gateway::detail::sse_writer>{}, gateway::stream_body::bytes);
  }

  /// No socket behind it: a streamed body cannot be read (routes under test
  /// buffer theirs).
  void read_body_chunk(uint64_t, size_t, gateway::body_chunk_handler then) override {
    then(gateway::body_failure(
      make_status(errc::unavailable, "the recording transport streams no request body")));
  }

  /// Calls of any deliver method so far.
  int delivered() const {
    std::lock_guard lock(mutex_);
    return delivered_;
  }
  uint64_t last_sequence() const {
    std::lock_guard lock(mutex_);
    return last_sequence_;
  }
  /// The last response deliver() got (default-constructed before one).
  gateway::http_response last() const {
    std::lock_guard lock(mutex_);
    return last_;
  }

  /// The answer, or a 599 when none came within `timeout`.
  gateway::http_response wait(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [this] { return answered_; }))
      return gateway::http_response{static_cast<gateway::http::status>(599), 11};
    return last_;
  }

private:
  void count(uint64_t sequence) {
    ++delivered_;
    last_sequence_ = sequence;
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int delivered_ = 0;
  uint64_t last_sequence_ = 0;
  bool answered_ = false;
  gateway::http_response last_;
};

} // namespace airlock::test
