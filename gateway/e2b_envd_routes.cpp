#include "gateway/e2b_envd_routes.hpp"

#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "e2b/connect.hpp"
#include "e2b/envd/filesystem/filesystem.pb.h"
#include "e2b/envd/process/process.pb.h"
#include "e2b/envd_methods.hpp"
#include "gateway/exchange.hpp"
#include "gateway/internal_call.hpp"
#include "schema/base64.hpp"

namespace airlock::gateway {

namespace {

using e2b::connect_code;
using e2b::connect_error;
using nlohmann::json;
using exchange_ptr = std::shared_ptr<exchange>;
namespace pb = google::protobuf;

struct envd_api {
  std::shared_ptr<const route_table> inner;
  e2b_envd_options options;
};

using envd_ptr = std::shared_ptr<const envd_api>;

std::optional<std::string> header(const exchange& ex, std::string_view name) {
  auto found = ex.request().find(boost::beast::string_view(name.data(), name.size()));
  if (found == ex.request().end() || found->value().empty())
    return std::nullopt;
  return std::string(found->value());
}

http_response connect_failure(const connect_error& error) {
  http_response response{static_cast<http::status>(e2b::http_status_of(error.code)), 11};
  response.set(http::field::content_type, "application/json");
  response.body() = e2b::unary_error_body(error);
  return response;
}

/// Connect's code for a /v1 answer that failed, by its status.
connect_code code_of_status(unsigned status) {
  switch (status) {
    case 400: return connect_code::invalid_argument;
    case 401: return connect_code::unauthenticated;
    case 403: return connect_code::permission_denied;
    case 404: return connect_code::not_found;
    case 409: return connect_code::failed_precondition;
    case 413: return connect_code::resource_exhausted;
    case 429: return connect_code::resource_exhausted;
    case 501: return connect_code::unimplemented;
    case 503: return connect_code::unavailable;
    case 504: return connect_code::deadline_exceeded;
    default: return connect_code::internal;
  }
}

connect_error error_of(const http_response& answer) {
  auto body = json::parse(answer.body(), nullptr, false);
  std::string message = "airlock answered " + std::to_string(answer.result_int());
  if (body.is_object() && body.contains("error") && body["error"].is_object())
    message = body["error"].value("message", message);
  return {code_of_status(answer.result_int()), message};
}

/// "-rwxr-xr-x" for a type and permission bits.
std::string permissions_text(filesystem::FileType type, uint32_t mode) {
  std::string out = type == filesystem::FILE_TYPE_DIRECTORY ? "d"
                    : type == filesystem::FILE_TYPE_SYMLINK ? "l"
                                                            : "-";
  const char* letters = "rwxrwxrwx";
  for (int bit = 8; bit >= 0; --bit)
    out.push_back((mode >> bit) & 1 ? letters[8 - bit] : '-');
  return out;
}

filesystem::FileType file_type_of(const std::string& type) {
  if (type == "file")
    return filesystem::FILE_TYPE_FILE;
  if (type == "dir")
    return filesystem::FILE_TYPE_DIRECTORY;
  if (type == "symlink")
    return filesystem::FILE_TYPE_SYMLINK;
  return filesystem::FILE_TYPE_UNSPECIFIED;
}

/// The /v1 file entry `entry` (at `path`) as envd's EntryInfo.
void fill_entry(const json& entry, const std::string& path, filesystem::EntryInfo& out) {
  out.set_name(entry.value("name", path.substr(path.rfind('/') + 1)));
  out.set_type(file_type_of(entry.value("type", "")));
  out.set_path(path);
  out.set_size(entry.value("size_bytes", int64_t{0}));
  const uint32_t mode = entry.value("mode", 0u) & 07777;
  out.set_mode(mode);
  out.set_permissions(permissions_text(out.type(), mode));
}

/// A stream's answer when it fails before its first message: 200, then only
/// the end-of-stream envelope with the error (Connect puts a stream's errors there).
void refuse_stream(const exchange_ptr& ex, e2b::connect_content content, connect_error error) {
  http_response response{http::status::ok, 11};
  response.set(http::field::content_type, std::string(e2b::content_type_of(content)));
  response.body() = e2b::end_of_stream(error);
  ex->respond(std::move(response));
}

/// A path as the sandbox's default user means it: a relative one is under
/// the user's home.
std::string resolve_path(const envd_api& api, const std::string& path) {
  if (!path.empty() && path.front() == '/')
    return path;
  return api.options.home + (path.empty() ? "" : "/" + path);
}

/// One envd call: its exchange, sandbox, token and codec.
struct envd_call {
  envd_ptr api;
  exchange_ptr ex;
  std::string sandbox_id;
  std::string token;
  e2b::connect_content content;

  std::string files(std::string_view suffix, const std::string& path) const {
    return "/v1/sandboxes/" + sandbox_id + "/files" + std::string(suffix)
           + "?path=" + percent_encode(path, true);
  }

  std::string resolve(const std::string& path) const { return resolve_path(*api, path); }

  void fail(connect_error error) const {
    if (content.streaming)
      return refuse_stream(ex, content, std::move(error));
    ex->respond(connect_failure(error));
  }

  void reply(const pb::Message& message) const {
    auto bytes = e2b::encode_message(content.codec, message);
    if (!bytes)
      return fail(e2b::to_connect_error(bytes.error()));
    http_response response{http::status::ok, 11};
    response.set(http::field::content_type, std::string(e2b::content_type_of(content)));
    response.body() = std::move(*bytes);
    ex->respond(std::move(response));
  }

  /// Calls /v1 with the token; `then` with the answer (any status).
  void v1(http::verb method, std::string target, std::string body,
          std::function<void(http_response)> then) const {
    call_route(*api->inner, method, std::move(target), std::move(body), token, std::move(then));
  }

  /// Calls /v1; `then` with its JSON on a 2xx, else the Connect error.
  void v1_json(http::verb method, std::string target, std::function<void(json)> then) const {
    auto self = *this;
    v1(method, std::move(target), {}, [self, then](http_response answer) {
      if (answer.result_int() >= 300)
        return self.fail(error_of(answer));
      then(json::parse(answer.body(), nullptr, false));
    });
  }

  /// Stat of `path`, then `then` with it as EntryInfo.
  void stat(const std::string& path, std::function<void(filesystem::EntryInfo)> then) const {
    v1_json(http::verb::get, files("/stat", path), [path, then](json entry) {
      filesystem::EntryInfo info;
      fill_entry(entry, path, info);
      then(std::move(info));
    });
  }
};

void fs_stat(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const filesystem::StatRequest&>(message);
  call.stat(call.resolve(request.path()), [call](filesystem::EntryInfo info) {
    filesystem::StatResponse response;
    *response.mutable_entry() = std::move(info);
    call.reply(response);
  });
}

void fs_list(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const filesystem::ListDirRequest&>(message);
  if (request.depth() > 1)
    return call.fail({connect_code::unimplemented,
                      "ListDir with depth above 1 is not supported yet by airlock's envd"});
  auto path = call.resolve(request.path());
  call.v1_json(http::verb::get, call.files("/list", path), [call, path](json listing) {
    filesystem::ListDirResponse response;
    for (const auto& entry : listing.value("items", json::array())) {
      auto name = entry.value("name", "");
      auto* info = response.add_entries();
      fill_entry(entry, path == "/" ? "/" + name : path + "/" + name, *info);
      if (info->type() == filesystem::FILE_TYPE_UNSPECIFIED)
        response.mutable_entries()->RemoveLast(); // envd lists files, directories and links
    }
    call.reply(response);
  });
}

void fs_make_dir(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const filesystem::MakeDirRequest&>(message);
  auto path = call.resolve(request.path());
  call.v1(http::verb::get, call.files("/stat", path), {}, [call, path](http_response existing) {
    if (existing.result_int() == 200)
      return call.fail({connect_code::already_exists, path + " already exists"});
    call.v1(http::verb::post, call.files("/mkdir", path), {}, [call, path](http_response made) {
      if (made.result_int() >= 300)
        return call.fail(error_of(made));
      call.stat(path, [call](filesystem::EntryInfo info) {
        filesystem::MakeDirResponse response;
        *response.mutable_entry() = std::move(info);
        call.reply(response);
      });
    });
  });
}

void fs_remove(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const filesystem::RemoveRequest&>(message);
  auto target = call.files("", call.resolve(request.path())) + "&recursive=true";
  call.v1(http::verb::delete_, target, {}, [call](http_response removed) {
    // Removing what is not there succeeds, as envd's does.
    if (removed.result_int() >= 300 && removed.result_int() != 404)
      return call.fail(error_of(removed));
    call.reply(filesystem::RemoveResponse{});
  });
}

// ---- process.Process/Start: a process's events as a Connect stream ----------

/// The user an RPC names: Basic auth "<user>:" (the SDK's `user` option).
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

/// The v1 exec body for envd's StartRequest.
json exec_body(const envd_call& call, const process::StartRequest& request) {
  const auto& config = request.process();
  json argv = json::array({config.cmd()});
  for (const auto& arg : config.args())
    argv.push_back(arg);
  json env = json::object();
  for (const auto& [key, value] : config.envs())
    env[key] = value;
  json body = {{"argv", argv}, {"env", env}};
  body["cwd"] = config.has_cwd() ? call.resolve(config.cwd()) : call.api->options.home;
  if (request.has_pty())
    body["pty"] = {{"rows", request.pty().size().rows()}, {"cols", request.pty().size().cols()}};
  // envd keeps stdin open unless told otherwise (older SDKs do not say).
  body["stdin"] = request.has_stdin() ? request.stdin() : true;
  if (auto user = rpc_user(*call.ex))
    body["user"] = *user;
  return body;
}

/// Streams a started process's events to the client until it ends.
class process_events : public std::enable_shared_from_this<process_events> {
public:
  process_events(envd_call call, std::shared_ptr<sse_stream> out, bool pty)
      : call_(std::move(call)), out_(std::move(out)), pty_(pty) {}

  /// Sends start{pid}, then the process's output from `offset` (its
  /// combined stdout and stderr) to its exit.
  void start(const std::string& process_id, uint32_t pid, uint64_t offset = 0) {
    process::StartResponse started;
    started.mutable_event()->mutable_start()->set_pid(pid);
    send(started);
    auto self = shared_from_this();
    internal_stream_handlers handlers;
    handlers.event = [self](internal_event event) { self->on_event(event); };
    handlers.answered = [self](http_response answer) { self->finish(error_of(answer)); };
    handlers.ended = [self](std::string_view reason) {
      if (!self->ended_)
        self->finish(connect_error{connect_code::unavailable, "the process's output ended ("
                                                                + std::string(reason)
                                                                + ") before it exited"});
    };
    handlers.pace = [self](std::function<void()> resume) {
      self->out_->when_drained(std::move(resume));
    };
    const auto target =
      "/v1/sandboxes/" + call_.sandbox_id + "/processes/" + process_id + "/output";
    std::vector<std::pair<std::string, std::string>> from;
    if (offset > 0)
      from.emplace_back("Last-Event-ID", std::to_string(offset));
    input_ =
      call_stream_route(*call_.api->inner, http::verb::get, target, call_.token, handlers, from);
    out_->on_close([self](std::string_view) {
      if (auto input = self->input_)
        input->stop();
    });
  }

private:
  void send(const pb::Message& message) {
    auto bytes = e2b::encode_message(call_.content.codec, message);
    if (bytes)
      out_->send_bytes(e2b::envelope(0, *bytes));
  }

  void on_event(const internal_event& event) {
    if (event.event == "stdout" || event.event == "stderr") {
      auto chunk = json::parse(event.data, nullptr, false);
      if (!chunk.is_object())
        return;
      std::string bytes = chunk.value("data", "");
      if (chunk.value("encoding", "") == "base64")
        bytes = base64_decode(bytes).value_or("");
      process::StartResponse data;
      auto* output = data.mutable_event()->mutable_data();
      if (pty_)
        output->set_pty(std::move(bytes));
      else if (event.event == "stdout")
        output->set_stdout(std::move(bytes));
      else
        output->set_stderr(std::move(bytes));
      return send(data);
    }
    if (event.event != "exit")
      return;
    auto exit = json::parse(event.data, nullptr, false);
    process::StartResponse ended;
    auto* end = ended.mutable_event()->mutable_end();
    end->set_exited(true);
    if (exit.is_object() && exit.value("exit_code", json()).is_number_integer()) {
      const int code = exit["exit_code"].get<int>();
      end->set_exit_code(code);
      end->set_status("exit status " + std::to_string(code));
      if (code != 0)
        end->set_error("exit status " + std::to_string(code));
    } else {
      const int signal = exit.is_object() ? exit.value("signal", 0) : 0;
      end->set_exit_code(-1);
      end->set_status("signal: " + std::to_string(signal));
      end->set_error("killed by signal " + std::to_string(signal));
    }
    send(ended);
    finish(std::nullopt);
  }

  void finish(std::optional<connect_error> error) {
    if (ended_)
      return;
    ended_ = true;
    out_->send_bytes(e2b::end_of_stream(error));
    out_->close();
  }

  envd_call call_;
  std::shared_ptr<sse_stream> out_;
  bool pty_;
  std::shared_ptr<internal_stream> input_;
  std::atomic<bool> ended_{false};
};

void process_start(const envd_call& call, const process::StartRequest& request) {
  call.v1(http::verb::post, "/v1/sandboxes/" + call.sandbox_id + "/processes",
          exec_body(call, request).dump(), [call, pty = request.has_pty()](http_response answer) {
            if (answer.result_int() >= 300) {
              // Before any event: the error goes in the end-of-stream envelope.
              http_response response{http::status::ok, 11};
              response.set(http::field::content_type,
                           std::string(e2b::content_type_of(call.content)));
              response.body() = e2b::end_of_stream(error_of(answer));
              return call.ex->respond(std::move(response));
            }
            auto started = json::parse(answer.body(), nullptr, false);
            http_response head{http::status::ok, 11};
            head.set(http::field::content_type, std::string(e2b::content_type_of(call.content)));
            sse_options paced;
            paced.heartbeat_ms = 0;
            auto out = call.ex->open_body_stream(std::move(head), paced);
            auto events = std::make_shared<process_events>(call, out, pty);
            events->start(started.value("process_id", ""), started.value("pid", 0u));
          });
}

/// The running process with sandbox pid `pid`, as /v1 lists it; then `then`.
void with_process(const envd_call& call, uint32_t pid, std::function<void(json)> then) {
  call.v1_json(http::verb::get, "/v1/sandboxes/" + call.sandbox_id + "/processes",
               [call, pid, then](json listing) {
                 for (const auto& process : listing.value("items", json::array()))
                   if (process.value("pid", 0u) == pid && process.value("state", "") == "running")
                     return then(process);
                 call.fail({connect_code::not_found, "no running process " + std::to_string(pid)});
               });
}

std::string process_path(const envd_call& call, const json& process, std::string_view suffix) {
  return "/v1/sandboxes/" + call.sandbox_id + "/processes/" + process.value("process_id", "")
         + std::string(suffix);
}

/// Calls `suffix` of the process a selector names with `body`, then answers `reply`.
void process_action(const envd_call& call, const process::ProcessSelector& selector,
                    std::string suffix, std::string body, const pb::Message& reply) {
  if (selector.selector_case() != process::ProcessSelector::kPid)
    return call.fail(
      {connect_code::unimplemented, "processes are found by pid; tags are not kept"});
  std::shared_ptr<pb::Message> answer(reply.New());
  with_process(call, selector.pid(), [call, suffix, body, answer](json process) {
    call.v1(http::verb::post, process_path(call, process, suffix), body,
            [call, answer](http_response done) {
              if (done.result_int() >= 300)
                return call.fail(error_of(done));
              call.reply(*answer);
            });
  });
}

void process_list(const envd_call& call, const pb::Message&) {
  call.v1_json(http::verb::get, "/v1/sandboxes/" + call.sandbox_id + "/processes",
               [call](json listing) {
                 process::ListResponse response;
                 // A process still starting has no pid yet: it is not listed.
                 for (const auto& process : listing.value("items", json::array()))
                   if (process.value("state", "") == "running" && process.value("pid", 0u) > 0) {
                     auto* info = response.add_processes();
                     info->set_pid(process.value("pid", 0u));
                     // The SDK reads config's fields: it must be there, even empty.
                     info->mutable_config();
                   }
                 call.reply(response);
               });
}

void process_send_input(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const process::SendInputRequest&>(message);
  const auto& input = request.input();
  std::string bytes =
    input.input_case() == process::ProcessInput::kPty ? input.pty() : input.stdin();
  process_action(call, request.process(), "/stdin", std::move(bytes), process::SendInputResponse{});
}

void process_close_stdin(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const process::CloseStdinRequest&>(message);
  process_action(call, request.process(), "/stdin/close", {}, process::CloseStdinResponse{});
}

void process_send_signal(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const process::SendSignalRequest&>(message);
  int signal = request.signal() == process::SIGNAL_SIGTERM ? 15 : 9;
  if (request.signal() == process::SIGNAL_UNSPECIFIED)
    return call.fail({connect_code::invalid_argument, "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM"});
  process_action(call, request.process(), "/signal", json{{"signal", signal}}.dump(),
                 process::SendSignalResponse{});
}

void process_update(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const process::UpdateRequest&>(message);
  if (!request.has_pty())
    return call.reply(process::UpdateResponse{});
  json size = {{"rows", request.pty().size().rows()}, {"cols", request.pty().size().cols()}};
  process_action(call, request.process(), "/resize", size.dump(), process::UpdateResponse{});
}

/// Connect: the events of a running process from now on, start{pid} first.
void process_connect(const envd_call& call, const process::ConnectRequest& request) {
  if (request.process().selector_case() != process::ProcessSelector::kPid)
    return call.fail(
      {connect_code::unimplemented, "processes are found by pid; tags are not kept"});
  const uint32_t pid = request.process().pid();
  call.v1_json(
    http::verb::get, "/v1/sandboxes/" + call.sandbox_id + "/processes", [call, pid](json listing) {
      for (const auto& process : listing.value("items", json::array())) {
        if (process.value("pid", 0u) != pid || process.value("state", "") != "running")
          continue;
        http_response head{http::status::ok, 11};
        head.set(http::field::content_type, std::string(e2b::content_type_of(call.content)));
        sse_options paced;
        paced.heartbeat_ms = 0;
        auto out = call.ex->open_body_stream(std::move(head), paced);
        auto events = std::make_shared<process_events>(call, out, process.value("pty", false));
        const uint64_t now =
          process.value("stdout_bytes", uint64_t{0}) + process.value("stderr_bytes", uint64_t{0});
        return events->start(process.value("process_id", ""), pid, now);
      }
      refuse_stream(call.ex, call.content,
                    {connect_code::not_found, "no running process " + std::to_string(pid)});
    });
}

/// The first message of a stream request (one envelope: the SDK sends its
/// request whole).
template <class Message>
std::optional<Message> stream_request(const envd_call& call) {
  e2b::envelope_reader reader(call.api->options.message_bytes_max);
  reader.feed(call.ex->request().body());
  auto frame = reader.next();
  Message message;
  if (!frame || !*frame) {
    call.fail({connect_code::invalid_argument,
               frame ? "the request holds no whole envelope" : frame.error().message});
    return std::nullopt;
  }
  if (auto decoded = e2b::decode_message(call.content.codec, (*frame)->payload, message);
      !decoded) {
    call.fail(e2b::to_connect_error(decoded));
    return std::nullopt;
  }
  return message;
}

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

// ---- /files: downloads and uploads ------------------------------------------

/// envd's plain HTTP error: {"code": status, "message"}.
http_response files_error(unsigned status, std::string_view message) {
  return json_response(static_cast<http::status>(status),
                       json{{"code", status}, {"message", message}});
}

http_response files_error_of(const http_response& answer) {
  auto error = error_of(answer);
  return files_error(answer.result_int(), error.message);
}

/// The sandbox and token of a /files request; nullopt after answering.
std::optional<std::pair<std::string, std::string>> files_access(const exchange_ptr& ex) {
  auto sandbox = header(*ex, "E2b-Sandbox-Id");
  auto token = header(*ex, "X-Access-Token");
  if (!sandbox || !token) {
    ex->respond(files_error(401, "send E2b-Sandbox-Id and X-Access-Token (signed URLs are not "
                                 "supported by airlock's envd yet)"));
    return std::nullopt;
  }
  return std::pair{*sandbox, *token};
}

void download(const envd_ptr& api, const exchange_ptr& ex) {
  auto access = files_access(ex);
  if (!access)
    return;
  auto path = ex->query("path");
  if (!path || path->empty())
    return ex->respond(files_error(400, "path is required"));
  const auto target = "/v1/sandboxes/" + access->first
                      + "/files?path=" + percent_encode(resolve_path(*api, *path), true);
  struct state {
    std::shared_ptr<sse_stream> out;
    std::shared_ptr<internal_stream> input;
  };
  auto shared = std::make_shared<state>();
  internal_stream_handlers handlers;
  handlers.answered = [ex](http_response answer) {
    if (answer.result_int() >= 300)
      return ex->respond(files_error_of(answer));
    http_response response{http::status::ok, 11};
    response.set(http::field::content_type, "application/octet-stream");
    response.body() = std::move(answer.body());
    ex->respond(std::move(response));
  };
  handlers.head = [ex, shared](http_response head) {
    http_response out{http::status::ok, 11};
    out.set(http::field::content_type, "application/octet-stream");
    if (auto length = head.find(http::field::content_length); length != head.end())
      out.set(http::field::content_length, length->value());
    sse_options paced;
    paced.heartbeat_ms = 0;
    shared->out = ex->open_body_stream(std::move(out), paced);
    shared->out->on_close([shared](std::string_view) {
      if (auto input = shared->input)
        input->stop();
    });
  };
  handlers.bytes = [shared](std::string bytes) {
    if (shared->out)
      shared->out->send_bytes(bytes);
  };
  handlers.pace = [shared](std::function<void()> resume) {
    if (shared->out)
      shared->out->when_drained(std::move(resume));
    else
      resume();
  };
  handlers.ended = [shared](std::string_view) {
    if (shared->out)
      shared->out->close();
  };
  shared->input =
    call_stream_route(*api->inner, http::verb::get, target, access->second, std::move(handlers));
}

struct upload_part {
  std::string path;
  std::string bytes;
};

/// The parts of a multipart/form-data body: each part's filename (the SDK
/// puts the destination path there) and content. invalid_argument when it
/// is not well formed.
result<std::vector<upload_part>> multipart_parts(std::string_view content_type,
                                                 std::string_view body) {
  auto at = content_type.find("boundary=");
  if (at == std::string_view::npos)
    return make_status(errc::invalid_argument, "multipart/form-data needs a boundary");
  auto boundary = content_type.substr(at + 9);
  boundary = boundary.substr(0, boundary.find(';'));
  if (boundary.size() >= 2 && boundary.front() == '"' && boundary.back() == '"')
    boundary = boundary.substr(1, boundary.size() - 2);
  const std::string delimiter = "--" + std::string(boundary);
  std::vector<upload_part> parts;
  size_t pos = body.find(delimiter);
  while (pos != std::string_view::npos) {
    pos += delimiter.size();
    if (body.substr(pos, 2) == "--")
      return parts;
    if (body.substr(pos, 2) != "\r\n")
      break;
    pos += 2;
    auto headers_end = body.find("\r\n\r\n", pos);
    if (headers_end == std::string_view::npos)
      break;
    auto headers = body.substr(pos, headers_end - pos);
    auto content_start = headers_end + 4;
    auto next = body.find("\r\n" + delimiter, content_start);
    if (next == std::string_view::npos)
      break;
    upload_part part;
    auto name_at = headers.find("filename=\"");
    if (name_at != std::string_view::npos) {
      auto name_end = headers.find('"', name_at + 10);
      if (name_end != std::string_view::npos)
        part.path = std::string(headers.substr(name_at + 10, name_end - name_at - 10));
    }
    part.bytes = std::string(body.substr(content_start, next - content_start));
    parts.push_back(std::move(part));
    pos = next + 2;
  }
  return make_status(errc::invalid_argument, "the multipart/form-data body is not well formed");
}

/// Writes the parts one after the other, then answers envd's list of entries.
void write_parts(const envd_ptr& api, const exchange_ptr& ex, std::string sandbox,
                 std::string token, std::shared_ptr<std::vector<upload_part>> parts, size_t next,
                 json written) {
  if (next == parts->size())
    return ex->respond(json_response(http::status::ok, written));
  auto& part = (*parts)[next];
  const auto path = resolve_path(*api, part.path);
  const auto target = "/v1/sandboxes/" + sandbox + "/files?path=" + percent_encode(path, true);
  call_route(*api->inner, http::verb::put, target, std::move(part.bytes), token,
             [api, ex, sandbox, token, parts, next, path,
              written = std::move(written)](http_response answer) mutable {
               if (answer.result_int() >= 300)
                 return ex->respond(files_error_of(answer));
               written.push_back(
                 {{"name", path.substr(path.rfind('/') + 1)}, {"path", path}, {"type", "file"}});
               write_parts(api, ex, sandbox, token, parts, next + 1, std::move(written));
             });
}

void upload(const envd_ptr& api, const exchange_ptr& ex) {
  auto access = files_access(ex);
  if (!access)
    return;
  if (header(*ex, "Content-Encoding"))
    return ex->respond(files_error(400, "compressed uploads are not supported by airlock's envd "
                                        "yet: send the bytes uncompressed"));
  const auto content_type = header(*ex, "Content-Type").value_or("");
  auto parts = std::make_shared<std::vector<upload_part>>();
  auto query_path = ex->query("path");
  if (content_type.rfind("multipart/form-data", 0) == 0) {
    auto parsed = multipart_parts(content_type, ex->request().body());
    if (!parsed)
      return ex->respond(files_error(400, parsed.error().message));
    *parts = std::move(*parsed);
    // One file with ?path=: that is where it goes.
    if (parts->size() == 1 && query_path && !query_path->empty())
      parts->front().path = *query_path;
  } else {
    if (!query_path || query_path->empty())
      return ex->respond(files_error(400, "path is required for an octet-stream upload"));
    parts->push_back({*query_path, ex->request().body()});
  }
  for (const auto& part : *parts)
    if (part.path.empty())
      return ex->respond(files_error(400, "a part has no filename: name its destination path"));
  write_parts(api, ex, access->first, access->second, parts, 0, json::array());
}

/// envd's /health: 204 while the sandbox runs, 502 otherwise (the SDK's
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
                         e2b_envd_options options) {
  auto api = std::make_shared<const envd_api>(envd_api{std::move(inner), std::move(options)});
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
