#include "worker/guest_link.hpp"

#include <csignal>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <variant>

namespace airlock::worker {

guest_link::guest_link(std::unique_ptr<guest::guest_client> client, int channel_fd, event_sink sink,
                       guest_link_options options)
    : client_(std::move(client)), channel_fd_(channel_fd), sink_(std::move(sink)),
      options_(options), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { run(); });
}

guest_link::~guest_link() { stop(); }

status guest_link::post(job work) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_)
      return make_status(errc::unavailable, "the guest link is stopped; the sandbox is going away");
    if (jobs_.size() >= options_.jobs_max)
      return make_status(errc::resource_exhausted,
                         "too many requests queued for this sandbox's guest; retry later");
    jobs_.push_back(std::move(work));
  }
  wake();
  return status::ok();
}

void guest_link::consumed(size_t bytes) noexcept {
  inflight_.fetch_sub(bytes);
  wake();
}

void guest_link::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable())
    thread_.join();
  client_.reset(); // closes the channel
}

void guest_link::wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof one);
}

void guest_link::drain_events() {
  while (!closed_ && inflight_.load() < options_.inflight_bytes_max) {
    auto event = client_->next_event(0);
    if (!event) {
      if (event.code() == errc::timeout)
        return;
      closed_ = true;
      sink_(guest::error_reply{0, 0, errc::unavailable,
                               "the guest channel closed: " + event.error().message, true});
      return;
    }
    if (const auto* chunk = std::get_if<guest::output_chunk>(&*event))
      inflight_.fetch_add(chunk->bytes.size());
    sink_(std::move(*event));
  }
}

void guest_link::run() {
  // guest_client writes with write(2): a guest that died must give EPIPE here,
  // not a SIGPIPE that ends the worker. Blocked for this thread only.
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
  for (;;) {
    std::deque<job> batch;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_)
        return;
      batch.swap(jobs_);
    }
    for (auto& work : batch)
      work(*client_);
    drain_events();
    const bool throttled = inflight_.load() >= options_.inflight_bytes_max;
    pollfd fds[2] = {{wake_fd_.get(), POLLIN, 0}, {channel_fd_, POLLIN, 0}};
    const nfds_t count = (closed_ || throttled) ? 1 : 2;
    ::poll(fds, count, throttled ? options_.backpressure_poll_ms : -1);
    uint64_t drained = 0;
    (void)!::read(wake_fd_.get(), &drained, sizeof drained);
  }
}

} // namespace airlock::worker
