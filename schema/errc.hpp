#pragma once
// The error vocabulary of airlock: one code list that every layer speaks, so a
// caller can act on a failure (retry, reconcile, report) without parsing text.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace airlock {

/// Expected failures. Never renumber: codes cross processes inside CAF errors.
enum class errc : uint8_t {
  none = 0,
  invalid_argument = 1, ///< the input is wrong; do not retry unchanged
  not_found = 2,
  already_exists = 3,
  wrong_state = 4,         ///< the resource's state does not allow this now
  corrupt_record = 5,      ///< stored bytes do not decode
  unsupported_version = 6, ///< stored record written by a newer airlock
  io_error = 7,            ///< the disk or store failed
  timeout = 8,             ///< gave up waiting; nothing happened
  outcome_unknown = 9,     ///< gave up waiting; the effect may have happened: reconcile
  cancelled = 10,
  unavailable = 11,        ///< try again later (shutting down, not ready)
  resource_exhausted = 12, ///< a limit was hit
  internal = 13,           ///< a bug; logged with context
  unknown_kind = 14,       ///< no procedure is registered for an operation kind
  deadline_exceeded = 15,  ///< the operation's own deadline passed
  unauthenticated = 16,
  permission_denied = 17,
  conflict = 18,      ///< the request contradicts an earlier one (idempotency key reuse)
  gone = 19,          ///< existed once, no longer retained (output dropped from a buffer)
  too_large = 20,     ///< the input or the result exceeds an explicit size limit
  unimplemented = 21, ///< this build does not do that yet
};

/// snake_case name used in logs and the HTTP API's error codes.
std::string_view to_string(errc code) noexcept;

/// The code named `name` (to_string's inverse); internal for a name this
/// build does not know (a newer peer's).
errc errc_from_string(std::string_view name) noexcept;

/// A failure with a code and a sentence for humans.
struct [[nodiscard]] status {
  errc code = errc::none;
  std::string message;

  static status ok() { return {}; }
  bool is_ok() const noexcept { return code == errc::none; }
  explicit operator bool() const noexcept { return is_ok(); }
};

inline status make_status(errc code, std::string message) {
  return status{code, std::move(message)};
}

/// A value or a failure; the value type of every fallible call below actors/.
template <class T>
class [[nodiscard]] result {
public:
  result(T value) : data_(std::move(value)) {}          // NOLINT: implicit by design
  result(status failure) : data_(std::move(failure)) {} // NOLINT: implicit by design

  bool has_value() const noexcept { return data_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// Precondition: !has_value().
  const status& error() const { return std::get<1>(data_); }
  errc code() const noexcept { return has_value() ? errc::none : error().code; }

private:
  std::variant<T, status> data_;
};

} // namespace airlock
