#include "gateway/e2b_envd_routes.hpp"

#include <cctype>
#include <charconv>

#include "e2b/envd_methods.hpp"
#include "gateway/e2b_envd_internal.hpp"
#include "schema/base64.hpp"

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
    if (name == "Move")
      return fs_move;
    if (name == "CreateWatcher")
      return fs_create_watcher;
    if (name == "GetWatcherEvents")
      return fs_get_watcher_events;
    if (name == "RemoveWatcher")
      return fs_remove_watcher;
  }
  return std::nullopt;
}

void serve_rpc_as(const envd_call& call, const std::string& path, const e2b::envd_method& method);

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
  envd_call unresolved{api, ex, *sandbox, *token, *content, {}};
  with_account(std::move(unresolved), rpc_user(*ex),
               [path, method = *method](envd_call call) { serve_rpc_as(call, path, method); });
}

void serve_rpc_as(const envd_call& call, const std::string& path, const e2b::envd_method& method) {
  const auto& ex = call.ex;
  const auto& content = call.content;
  const bool streams = method.kind != e2b::rpc_kind::unary;
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
  if (path == "/process.Process/StreamInput")
    return process_stream_input(call);
  if (path == "/process.Process/Connect") {
    if (auto request = stream_request<process::ConnectRequest>(call))
      process_connect(call, *request);
    return;
  }
  auto handler = unary_handler_for(method.service(), method.name());
  if (!handler) {
    connect_error error{connect_code::unimplemented,
                        path + " is not served yet by airlock's envd (docs/e2b.md)"};
    if (streams)
      return refuse_stream(ex, content, error);
    return call.fail(error);
  }
  auto request = method.new_request();
  if (auto decoded = e2b::decode_message(content.codec, ex->request().body(), *request); !decoded)
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

namespace envd_detail {

std::optional<std::string> rpc_user(const exchange& ex) {
  auto value = header(ex, "Authorization");
  if (!value || value->rfind("Basic ", 0) != 0)
    return std::nullopt;
  auto decoded = base64_decode(std::string_view(*value).substr(6));
  if (!decoded)
    return std::nullopt;
  auto user = decoded->substr(0, decoded->find(':'));
  if (user.empty())
    return std::nullopt;
  return user;
}

void with_account(envd_call call, std::optional<std::string> asked,
                  std::function<void(envd_call)> then) {
  if (asked) {
    call.account = account_named(*asked);
    return then(std::move(call));
  }
  const auto name = call.api->options.default_user;
  if (auto known = call.api->accounts->get(call.sandbox_id)) {
    call.account = *known ? account_named(name) : envd_account{};
    return then(std::move(call));
  }
  const auto target = call.files("/stat", account_named(name).home);
  auto probe = call;
  probe.v1(http::verb::get, target, {},
           [call = std::move(call), then, name](http_response answer) mutable {
             auto entry = json::parse(answer.body(), nullptr, false);
             const bool has_user =
               answer.result_int() == 200 && entry.is_object() && entry.value("type", "") == "dir";
             // Only a sure answer is kept: a sandbox not running yet is asked again.
             if (answer.result_int() == 200 || answer.result_int() == 404)
               call.api->accounts->put(call.sandbox_id, has_user);
             call.account = has_user ? account_named(name) : envd_account{};
             then(std::move(call));
           });
}

void give_to_account(const envd_call& call, const std::string& path,
                     std::function<void(std::optional<connect_error>)> then) {
  if (call.account.is_root())
    return then(std::nullopt);
  // The path and the directories above it that are inside the home.
  json argv = json::array({"chown", "--no-dereference", call.account.user + ":"});
  const auto& home = call.account.home;
  if (path.rfind(home + "/", 0) == 0)
    for (auto slash = path.find('/', home.size() + 1); slash != std::string::npos;
         slash = path.find('/', slash + 1))
      argv.push_back(path.substr(0, slash));
  argv.push_back(path);
  json body = {{"argv", argv}, {"stdin", false}};
  const auto processes = "/v1/sandboxes/" + call.sandbox_id + "/processes";
  call.v1(http::verb::post, processes, body.dump(),
          [call, processes, path, then](http_response started) {
            if (started.result_int() >= 300)
              return then(error_of(started));
            auto id = json::parse(started.body(), nullptr, false).value("process_id", "");
            call.v1(http::verb::get, processes + "/" + id + "?wait=30", {},
                    [call, path, then](http_response ended) {
                      auto state = json::parse(ended.body(), nullptr, false);
                      if (ended.result_int() == 200 && state.is_object()
                          && state.value("exit_code", json()) == json(0))
                        return then(std::nullopt);
                      then(connect_error{connect_code::internal, "could not give " + path + " to "
                                                                   + call.account.user + ": "
                                                                   + ended.body()});
                    });
          });
}

} // namespace envd_detail

std::function<void(http::request_header<>&)> e2b_host_rewriter(std::string domain) {
  for (auto& c : domain)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return [suffix = "." + domain](http::request_header<>& head) {
    std::string host(head[http::field::host]);
    if (auto colon = host.rfind(':'); colon != std::string::npos)
      host.resize(colon);
    for (auto& c : host)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (host.size() <= suffix.size() || !host.ends_with(suffix))
      return;
    std::string_view label(host.data(), host.size() - suffix.size());
    auto dash = label.find('-');
    if (dash == std::string_view::npos || dash == 0 || dash + 1 == label.size())
      return;
    uint32_t port = 0;
    auto [end, failed] = std::from_chars(label.data(), label.data() + dash, port);
    if (failed != std::errc{} || end != label.data() + dash)
      return;
    const std::string sandbox(label.substr(dash + 1));
    if (port != e2b_envd_port) {
      head.target("/e2b/sandbox-port/" + std::to_string(port));
      return;
    }
    head.set("E2b-Sandbox-Id", sandbox);
    head.target("/e2b/envd" + std::string(head.target()));
  };
}

void add_e2b_envd_routes(route_table& routes, std::shared_ptr<const route_table> inner,
                         std::shared_ptr<const envd_token_book> tokens, const wall_clock* clock,
                         e2b_envd_options options) {
  // A clock for watchers' expiries when the deps name none (a route listing).
  static const system_wall_clock system_clock;
  const wall_clock& timer = clock ? *clock : system_clock;
  auto watchers = std::make_shared<watcher_table>(timer, options);
  auto api = std::make_shared<const envd_api>(
    envd_api{std::move(inner), std::move(options), std::move(tokens), clock,
             std::make_shared<default_user_cache>(), std::move(watchers)});
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
  // The SDK's signed URLs are built as new URL("/files", E2B_SANDBOX_URL),
  // which drops the base's path: they arrive at the listener's root.
  routes.add_async(http::verb::get, "/files", [api](exchange_ptr ex) { download(api, ex); });
  for (auto verb : {http::verb::get, http::verb::post, http::verb::put, http::verb::delete_,
                    http::verb::patch, http::verb::head, http::verb::options})
    routes.add(verb, "/e2b/sandbox-port/{port}", [](const http_request&) {
      return json_response(http::status::not_implemented,
                           {{"code", 501},
                            {"message", "airlock does not expose a sandbox's ports by host name "
                                        "(only envd's, 49983); docs/e2b.md"}});
    });
  routes.add_async(
    http::verb::post, "/files", [api](exchange_ptr ex) { upload(api, ex); }, upload_body);
}

} // namespace airlock::gateway
