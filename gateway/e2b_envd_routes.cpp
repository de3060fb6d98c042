#include "gateway/e2b_envd_routes.hpp"

#include "e2b/envd_methods.hpp"
#include "gateway/e2b_envd_internal.hpp"

namespace airlock::gateway {

namespace {

using namespace envd_detail;

using unary_handler = void (*)(const envd_call&, const pb::Message&);

std::optional<unary_handler> unary_handler_for(std::string_view service, std::string_view name) {
  if (service == "process.Process") {
    if (name == "List")
      return process_list;
    if (name == "SendInput")
      return process_send_input;
    if (name == "CloseStdin")
      return process_close_stdin;
    if (name == "SendSignal")
      return process_send_signal;
    if (name == "Update")
      return process_update;
  }
  if (service == "filesystem.Filesystem") {
    if (name == "Stat")
      return fs_stat;
    if (name == "ListDir")
      return fs_list;
    if (name == "MakeDir")
      return fs_make_dir;
    if (name == "Remove")
      return fs_remove;
    if (name == "CreateWatcher")
      return fs_create_watcher;
    if (name == "GetWatcherEvents")
      return fs_get_watcher_events;
    if (name == "RemoveWatcher")
      return fs_remove_watcher;
  }
  return std::nullopt;
}

void serve_rpc(const envd_ptr& api, const exchange_ptr& ex) {
  const std::string path =
    "/" + std::string(ex->path_param("service")) + "/" + std::string(ex->path_param("method"));
  auto method = e2b::find_envd_method(path);
  if (!method)
    return ex->respond(
      connect_failure({connect_code::unimplemented, "envd has no method " + path}));
  auto content = e2b::parse_content_type(header(*ex, "Content-Type").value_or("application/json"));
  if (!content) {
    auto response = connect_failure({connect_code::invalid_argument, content.error().message});
    response.result(http::status::unsupported_media_type);
    return ex->respond(std::move(response));
  }
  const bool streams = method->kind != e2b::rpc_kind::unary;
  if (content->streaming != streams) {
    auto response = connect_failure(
      {connect_code::invalid_argument, path
                                         + (streams ? " streams: send application/connect+json"
                                                    : " is unary: send application/json")});
    response.result(http::status::unsupported_media_type);
    return ex->respond(std::move(response));
  }
  auto sandbox = header(*ex, "E2b-Sandbox-Id");
  if (!sandbox)
    return ex->respond(connect_failure(
      {connect_code::invalid_argument, "send the sandbox's id in the E2b-Sandbox-Id header"}));
  auto token = header(*ex, "X-Access-Token");
  if (!token)
    return ex->respond(connect_failure(
      {connect_code::unauthenticated,
       "send the sandbox's envdAccessToken (from create or connect) in X-Access-Token"}));
  envd_call call{api, ex, *sandbox, *token, *content};
  if (path == "/process.Process/Start") {
    if (auto request = stream_request<process::StartRequest>(call))
      process_start(call, *request);
    return;
  }
  if (path == "/filesystem.Filesystem/WatchDir") {
    if (auto request = stream_request<filesystem::WatchDirRequest>(call))
      fs_watch_dir(call, *request);
    return;
  }
  if (path == "/process.Process/Connect") {
    if (auto request = stream_request<process::ConnectRequest>(call))
      process_connect(call, *request);
    return;
  }
  auto handler = unary_handler_for(method->service(), method->name());
  if (!handler) {
    connect_error error{connect_code::unimplemented,
                        path + " is not served yet by airlock's envd (docs/e2b.md)"};
    if (streams)
      return refuse_stream(ex, *content, error);
    return call.fail(error);
  }
  auto request = method->new_request();
  if (auto decoded = e2b::decode_message(content->codec, ex->request().body(), *request); !decoded)
    return call.fail(e2b::to_connect_error(decoded));
  (*handler)(call, *request);
}

/// isRunning() is false on 502 only).
void health(const envd_ptr& api, const exchange_ptr& ex) {
  auto sandbox = header(*ex, "E2b-Sandbox-Id");
  auto token = header(*ex, "X-Access-Token");
  if (!sandbox || !token)
    return ex->respond(json_error(http::status::bad_gateway, "unavailable",
                                  "no sandbox named (E2b-Sandbox-Id, X-Access-Token)"));
  call_route(*api->inner, http::verb::get, "/v1/sandboxes/" + *sandbox + "/files/stat?path=%2F", {},
             *token, [ex](http_response answer) {
               if (answer.result_int() == 200)
                 return ex->respond(http_response{http::status::no_content, 11});
               ex->respond(
                 json_response(http::status::bad_gateway,
                               json{{"code", 502}, {"message", "the sandbox is not running"}}));
             });
}

} // namespace

void add_e2b_envd_routes(route_table& routes, std::shared_ptr<const route_table> inner,
                         const wall_clock& clock, e2b_envd_options options) {
  auto watchers = std::make_shared<watcher_table>(clock, options);
  auto api = std::make_shared<const envd_api>(
    envd_api{std::move(inner), std::move(options), std::move(watchers)});
  route_options rpc_body;
  rpc_body.body_bytes_max = api->options.message_bytes_max;
  routes.add_async(
    http::verb::post, "/e2b/envd/{service}/{method}",
    [api](exchange_ptr ex) { serve_rpc(api, ex); }, rpc_body);
  routes.add_async(http::verb::get, "/e2b/envd/health",
                   [api](exchange_ptr ex) { health(api, ex); });
  routes.add_async(http::verb::get, "/e2b/envd/files",
                   [api](exchange_ptr ex) { download(api, ex); });
  route_options upload_body;
  upload_body.body_bytes_max = api->options.upload_bytes_max;
  routes.add_async(
    http::verb::post, "/e2b/envd/files", [api](exchange_ptr ex) { upload(api, ex); }, upload_body);
}

} // namespace airlock::gateway
