#pragma once
// GET /v1/openapi.json: the API's machine-readable contract, generated from
// the routes the listener really has. Each route's description comes from
// one table (openapi.cpp); a route without one is listed under
// `x-undocumented`, which a test keeps empty.

#include <nlohmann/json.hpp>

#include "gateway/router.hpp"

namespace airlock::gateway {

/// The OpenAPI 3.0 document of `routes`.
nlohmann::json openapi_document(const route_table& routes);

/// Adds GET /v1/openapi.json describing `routes` as they are when called
/// (call it last). Public, like /healthz: it holds no tenant data.
void add_openapi_route(route_table& routes);

} // namespace airlock::gateway
