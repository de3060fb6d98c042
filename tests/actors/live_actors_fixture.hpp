#pragma once
// The fixture of the actors tests that run on a real (threaded) actor system
// over an in-memory store, a manual wall clock and system entropy
// (registry_and_keys_test.cpp, egress_actors_test.cpp). engine_fixture.hpp
// drives a deterministic scheduler instead.

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "actors/clock.hpp"
#include "actors/system_config.hpp"
#include "storage/kv_store.hpp"
#include "tests/support/actor_ask.hpp"

namespace airlock::actors {

class live_actors_test : public ::testing::Test {
protected:
  /// Stops every actor handed to own(); the members they use outlive them.
  ~live_actors_test() override {
    for (const auto& handle : owned_)
      caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  }

  /// Keeps `handle` to stop its actor when the test ends.
  template <class Handle>
  Handle own(Handle handle) {
    owned_.push_back(caf::actor_cast<caf::actor>(handle));
    return handle;
  }

  /// A request from a fresh scoped actor; no reply in ten seconds is an error.
  template <class T, class Handle, class... Ts>
  result<T> ask(const Handle& dest, Ts&&... xs) {
    caf::scoped_actor self{system};
    return airlock::test::ask<T>(self, dest, std::chrono::seconds(10), std::forward<Ts>(xs)...);
  }

  system_config config;
  caf::actor_system system{config};
  std::unique_ptr<storage::kv_store> store = storage::make_memory_store();
  manual_wall_clock clock;
  system_entropy entropy;

private:
  std::vector<caf::actor> owned_;
};

} // namespace airlock::actors
