#include "gateway/openapi.hpp"

#include <gtest/gtest.h>

#include "gateway/api_routes.hpp"
#include "gateway/data_routes.hpp"
#include "gateway/e2b_routes.hpp"
#include "gateway/http_server.hpp"

namespace airlock::gateway {
namespace {

/// The table `airlockd serve` builds (handles are never called here).
route_table serve_routes() {
  route_table routes;
  add_operator_routes(routes, {});
  add_control_routes(routes, control_api_deps{});
  add_data_routes(routes, data_plane_deps{});
  add_e2b_routes(routes, std::make_shared<const route_table>(routes), nullptr, nullptr);
  add_openapi_route(routes);
  return routes;
}

TEST(openapi, every_registered_route_is_documented) {
  auto routes = serve_routes();
  auto document = openapi_document(routes);
  EXPECT_TRUE(document["x-undocumented"].empty()) << document["x-undocumented"].dump();
}

TEST(openapi, the_document_lists_every_route_of_api_md) {
  auto document = openapi_document(serve_routes());
  const std::pair<const char*, const char*> contract[] = {
    {"get", "/v1/operations/{id}"},
    {"get", "/v1/operations/{id}/events"},
    {"get", "/v1/operations"},
    {"post", "/v1/operations/{id}/cancel"},
    {"post", "/v1/sandboxes"},
    {"get", "/v1/sandboxes/{id}"},
    {"get", "/v1/sandboxes"},
    {"patch", "/v1/sandboxes/{id}"},
    {"delete", "/v1/sandboxes/{id}"},
    {"post", "/v1/sandboxes/{id}/pause"},
    {"post", "/v1/sandboxes/{id}/resume"},
    {"post", "/v1/sandboxes/{id}/suspend"},
    {"post", "/v1/sandboxes/{id}/restore"},
    {"post", "/v1/sandboxes/{id}/wake"},
    {"post", "/v1/sandboxes/{id}/fork"},
    {"post", "/v1/sandboxes/{id}/token"},
    {"post", "/v1/sandboxes/{id}/checkpoints"},
    {"get", "/v1/sandboxes/{id}/checkpoints"},
    {"post", "/v1/sandboxes/{id}/processes"},
    {"get", "/v1/sandboxes/{id}/processes"},
    {"get", "/v1/sandboxes/{id}/processes/{pid}"},
    {"get", "/v1/sandboxes/{id}/processes/{pid}/output"},
    {"post", "/v1/sandboxes/{id}/processes/{pid}/stdin"},
    {"post", "/v1/sandboxes/{id}/processes/{pid}/stdin/close"},
    {"post", "/v1/sandboxes/{id}/processes/{pid}/signal"},
    {"post", "/v1/sandboxes/{id}/processes/{pid}/resize"},
    {"get", "/v1/sandboxes/{id}/files"},
    {"put", "/v1/sandboxes/{id}/files"},
    {"delete", "/v1/sandboxes/{id}/files"},
    {"get", "/v1/sandboxes/{id}/files/list"},
    {"get", "/v1/sandboxes/{id}/files/stat"},
    {"post", "/v1/sandboxes/{id}/files/mkdir"},
    {"get", "/v1/templates"},
    {"post", "/v1/templates"},
    {"get", "/v1/templates/{name}"},
    {"put", "/v1/templates/{name}/pool"},
    {"get", "/v1/workers"},
    {"post", "/v1/workers/{id}/cordon"},
    {"post", "/v1/workers/{id}/drain"},
    {"post", "/v1/workers/{id}/uncordon"},
    {"post", "/v1/credentials"},
    {"get", "/v1/credentials"},
    {"delete", "/v1/credentials/{id}"},
    {"get", "/v1/audit"},
    {"get", "/healthz"},
    {"get", "/readyz"},
    {"get", "/metrics"},
    {"get", "/v1/openapi.json"},
    {"get", "/ui"},
  };
  for (const auto& [method, path] : contract)
    EXPECT_TRUE(document["paths"].contains(path) && document["paths"][path].contains(method))
      << method << " " << path;
}

TEST(openapi, the_route_serves_the_generated_document) {
  auto routes = serve_routes();
  http_request request{http::verb::get, "/v1/openapi.json", 11};
  auto response = routes.dispatch(request);
  ASSERT_EQ(response.result(), http::status::ok);
  auto body = nlohmann::json::parse(response.body());
  EXPECT_EQ(body["openapi"], "3.0.3");
  EXPECT_TRUE(body["paths"].contains("/v1/openapi.json"));
}

} // namespace
} // namespace airlock::gateway
