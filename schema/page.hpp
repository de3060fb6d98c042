#pragma once
// One page of a listing: what a store's list or query returns and what the
// actors reply with (audit_page, credential_page), so that messages carry a
// schema type rather than a storage one.

#include <string>
#include <vector>

namespace airlock::schema {

template <class T>
struct page {
  std::vector<T> items;
  std::string next_cursor; ///< empty when there is nothing more
};

} // namespace airlock::schema
