#pragma once
// Messages are values: a test serializes one with CAF and reads it back, as a
// send to another node would, to see that every field survives.

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace airlock::test {

/// `value` through CAF's binary serializer and back. The type must be
/// announced in `system`'s config; a failure in either direction fails the
/// test (non-fatally) and returns what was read.
template <class T>
T caf_round_trip(caf::actor_system& system, const T& value) {
  std::vector<char> buffer;
  caf::binary_serializer sink{system, buffer};
  EXPECT_FALSE(sink(value));
  T copy;
  caf::binary_deserializer source{system, buffer};
  EXPECT_FALSE(source(copy));
  return copy;
}

} // namespace airlock::test
