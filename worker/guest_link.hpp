#pragma once
// guest_link: the dedicated thread that drives one sandbox's guest_client.
// guest_client is blocking and single-threaded, so the sandbox actor never
// touches it: it posts jobs (closures run on the link thread with the client)
// and receives every unsolicited guest message (started, output, exited,
// errors) through a sink called on the link thread.
//
// Bounds: at most `jobs_max` queued jobs (post() fails beyond it), and at most
// `inflight_bytes_max` of output handed to the sink and not yet acknowledged
// with consumed(); past that the thread stops reading the channel, the guest's
// credit window fills and the sandbox's processes are slowed down.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "guest/client.hpp"
#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::worker {

struct guest_link_options {
  /// Jobs queued for the link thread. Default: 1024.
  size_t jobs_max = 1024;
  /// Output bytes handed to the sink and not yet consumed(). Default: 4 MiB.
  size_t inflight_bytes_max = size_t{4} << 20;
  /// How often the thread re-checks the in-flight bound while it is exceeded.
  /// Default: 2.
  int backpressure_poll_ms = 2;
};

class guest_link {
public:
  /// Called on the link thread for each guest message no job consumed. When
  /// the channel closes, called once with an error_reply (ids 0, unavailable).
  using event_sink = std::function<void(guest::guest_message)>;
  /// Runs on the link thread; may block on the client within its own timeouts.
  using job = std::function<void(guest::guest_client&)>;

  /// Takes a handshaken client; `channel_fd` is the client's descriptor (only
  /// polled, never closed here). Starts the thread.
  guest_link(std::unique_ptr<guest::guest_client> client, int channel_fd, event_sink sink,
             guest_link_options options = {});
  /// Stops the thread and closes the channel (the guest then kills what it
  /// started and exits).
  ~guest_link();
  guest_link(const guest_link&) = delete;
  guest_link& operator=(const guest_link&) = delete;

  /// Queues `work`. resource_exhausted when the queue is full, unavailable
  /// after stop().
  status post(job work);

  /// The sink's consumer acknowledges output bytes it has taken.
  void consumed(size_t bytes) noexcept;

  /// Stops the thread (pending jobs are dropped) and joins it. Idempotent.
  void stop();

private:
  void run();
  void drain_events();
  void wake();

  std::unique_ptr<guest::guest_client> client_;
  int channel_fd_;
  event_sink sink_;
  guest_link_options options_;
  unique_fd wake_fd_; ///< eventfd
  std::mutex mutex_;
  std::deque<job> jobs_;
  bool stopping_ = false;
  bool closed_ = false; ///< the channel is gone (link thread only)
  std::atomic<size_t> inflight_{0};
  std::thread thread_;
};

} // namespace airlock::worker
