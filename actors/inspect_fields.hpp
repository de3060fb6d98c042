#pragma once
// inspect() for the fields CAF 0.17 cannot inspect on its own: std::optional,
// std::variant and airlock::status. A message's inspect names such a field
// through a wrapper it holds as an lvalue (a loading inspector needs one):
//
//   auto state = optional_field{x.state};
//   return f(caf::meta::type_name("sandbox_query"), x.tenant_id, state, ...);

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <variant>

#include "schema/errc.hpp"

namespace airlock {

/// A std::optional: a presence flag, then the value (a default one when absent).
template <class T>
struct optional_field {
  std::optional<T>& ref;
};

template <class T>
optional_field(std::optional<T>&) -> optional_field<T>;

template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, optional_field<T>& x) {
  bool present = x.ref.has_value();
  T value = present ? *x.ref : T{};
  if constexpr (Inspector::reads_state) {
    return f(present, value);
  } else {
    auto load = caf::meta::load_callback([&x, &present, &value]() -> caf::error {
      if (present)
        x.ref = std::move(value);
      else
        x.ref.reset();
      return caf::none;
    });
    return f(present, value, load);
  }
}

/// A std::variant: the index of the alternative, then the alternative.
template <class... Ts>
struct variant_field {
  std::variant<Ts...>& ref;
};

template <class... Ts>
variant_field(std::variant<Ts...>&) -> variant_field<Ts...>;

namespace inspect_detail {

template <size_t I, class Inspector, class... Ts>
caf::error load_alternative(Inspector& f, std::variant<Ts...>& x, size_t index) {
  if constexpr (I == sizeof...(Ts)) {
    return caf::make_error(caf::sec::invalid_argument);
  } else {
    if (index != I)
      return load_alternative<I + 1>(f, x, index);
    return f(x.template emplace<I>());
  }
}

} // namespace inspect_detail

template <class Inspector, class... Ts>
typename Inspector::result_type inspect(Inspector& f, variant_field<Ts...>& x) {
  static_assert(sizeof...(Ts) <= UINT8_MAX);
  if constexpr (Inspector::reads_state) {
    auto index = static_cast<uint8_t>(x.ref.index());
    return std::visit([&f, &index](auto& value) { return f(index, value); }, x.ref);
  } else {
    uint8_t index = 0;
    if (auto err = f(index))
      return err;
    return inspect_detail::load_alternative<0>(f, x.ref, index);
  }
}

/// A status travels as its code and sentence.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status& x) {
  return f(caf::meta::type_name("status"), x.code, x.message);
}

} // namespace airlock
