// envd's process.Process, made of the data plane's own process routes.

#include "gateway/e2b_envd_internal.hpp"

#include "schema/base64.hpp"

namespace airlock::gateway::envd_detail {

// ---- process.Process/Start: a process's events as a Connect stream ----------

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
  body["cwd"] = config.has_cwd() ? call.resolve(config.cwd()) : call.account.home;
  if (request.has_pty())
    body["pty"] = {{"rows", request.pty().size().rows()}, {"cols", request.pty().size().cols()}};
  // envd keeps stdin open unless told otherwise (older SDKs do not say).
  body["stdin"] = request.has_stdin() ? request.stdin() : true;
  if (!call.account.is_root())
    body["user"] = call.account.user;
  if (request.has_tag() && !request.tag().empty())
    body["tag"] = request.tag();
  return body;
}

/// process.Process's streams: a keepalive event on a quiet stream.
sse_options keepalive_options(const envd_call& call) {
  process::StartResponse keepalive;
  keepalive.mutable_event()->mutable_keepalive();
  return stream_keepalive(call, keepalive);
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
            auto out = call.ex->open_body_stream(std::move(head), keepalive_options(call));
            auto events = std::make_shared<process_events>(call, out, pty);
            events->start(started.value("process_id", ""), started.value("pid", 0u));
          });
}

/// Whether the /v1 process `process` is the running one `selector` names
/// (by sandbox pid, or by the tag it was started with).
bool selects(const process::ProcessSelector& selector, const json& process) {
  if (process.value("state", "") != "running")
    return false;
  if (selector.selector_case() == process::ProcessSelector::kTag)
    return process.value("tag", json()) == json(selector.tag());
  return selector.selector_case() == process::ProcessSelector::kPid
         && process.value("pid", 0u) == selector.pid();
}

std::string describe(const process::ProcessSelector& selector) {
  return selector.selector_case() == process::ProcessSelector::kTag
           ? "tag \"" + selector.tag() + "\""
           : std::to_string(selector.pid());
}

/// The running process `selector` names, as /v1 lists it; then `then`.
void with_process(const envd_call& call, const process::ProcessSelector& selector,
                  std::function<void(json)> then) {
  call.v1_json(http::verb::get, "/v1/sandboxes/" + call.sandbox_id + "/processes",
               [call, selector, then](json listing) {
                 for (const auto& process : listing.value("items", json::array()))
                   if (selects(selector, process))
                     return then(process);
                 call.fail({connect_code::not_found, "no running process " + describe(selector)});
               });
}

std::string process_path(const envd_call& call, const json& process, std::string_view suffix) {
  return "/v1/sandboxes/" + call.sandbox_id + "/processes/" + process.value("process_id", "")
         + std::string(suffix);
}

/// Calls `suffix` of the process a selector names with `body`, then answers `reply`.
void process_action(const envd_call& call, const process::ProcessSelector& selector,
                    std::string suffix, std::string body, const pb::Message& reply) {
  std::shared_ptr<pb::Message> answer(reply.New());
  with_process(call, selector, [call, suffix, body, answer](json process) {
    call.v1(http::verb::post, process_path(call, process, suffix), body,
            [call, answer](http_response done) {
              if (done.result_int() >= 300)
                return call.fail(error_of(done));
              call.reply(*answer);
            });
  });
}

/// envd's config of a /v1 process: argv as cmd and args (a shell line as
/// /bin/sh -c), the client's envs, the working directory.
void fill_config(const json& process, process::ProcessConfig& config) {
  auto argv = process.value("argv", json::array());
  if (argv.is_array() && !argv.empty()) {
    config.set_cmd(argv[0].get<std::string>());
    for (size_t i = 1; i < argv.size(); ++i)
      config.add_args(argv[i].get<std::string>());
  } else if (process.value("cmd", json()).is_string()) {
    config.set_cmd("/bin/sh");
    config.add_args("-c");
    config.add_args(process["cmd"].get<std::string>());
  }
  if (auto env = process.find("env"); env != process.end() && env->is_object())
    for (auto item = env->begin(); item != env->end(); ++item)
      if (item->is_string())
        (*config.mutable_envs())[item.key()] = item->get<std::string>();
  if (process.value("cwd", json()).is_string() && !process["cwd"].get<std::string>().empty())
    config.set_cwd(process["cwd"].get<std::string>());
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
                     fill_config(process, *info->mutable_config());
                     if (process.value("tag", json()).is_string())
                       info->set_tag(process["tag"].get<std::string>());
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

namespace {

/// Writes `inputs[next...]` to the process at `path`'s stdin in order, then
/// answers StreamInput's one response and the end of the stream.
void write_inputs(const envd_call& call, std::string path,
                  std::shared_ptr<const std::vector<std::string>> inputs, size_t next) {
  if (next == inputs->size()) {
    auto bytes = e2b::encode_message(call.content.codec, process::StreamInputResponse{});
    if (!bytes)
      return call.fail(e2b::to_connect_error(bytes.error()));
    http_response response{http::status::ok, 11};
    response.set(http::field::content_type, std::string(e2b::content_type_of(call.content)));
    response.body() = e2b::envelope(0, *bytes) + e2b::end_of_stream(std::nullopt);
    return call.ex->respond(std::move(response));
  }
  call.v1(http::verb::post, path, (*inputs)[next], [call, path, inputs, next](http_response done) {
    if (done.result_int() >= 300)
      return call.fail(error_of(done));
    write_inputs(call, path, inputs, next + 1);
  });
}

} // namespace

void process_stream_input(const envd_call& call) {
  // HTTP/1.1 gives the whole client stream at once: its envelopes are read
  // from the body (at most message_bytes_max in all), then written in order.
  e2b::envelope_reader reader(call.api->options.message_bytes_max);
  reader.feed(call.ex->request().body());
  std::optional<process::ProcessSelector> selector;
  auto inputs = std::make_shared<std::vector<std::string>>();
  for (;;) {
    auto frame = reader.next();
    if (!frame)
      return call.fail(e2b::to_connect_error(frame.error()));
    if (!*frame)
      break;
    if ((*frame)->flags != 0)
      return call.fail({connect_code::invalid_argument,
                        "a client's envelopes carry messages only (flags 0, uncompressed)"});
    process::StreamInputRequest message;
    if (auto decoded = e2b::decode_message(call.content.codec, (*frame)->payload, message);
        !decoded)
      return call.fail(e2b::to_connect_error(decoded));
    if (message.has_start() != !selector)
      return call.fail({connect_code::invalid_argument,
                        "StreamInput starts with one start message naming the process"});
    if (message.has_start()) {
      selector = message.start().process();
    } else if (message.has_data()) {
      const auto& input = message.data().input();
      auto bytes = input.input_case() == process::ProcessInput::kPty ? input.pty() : input.stdin();
      if (!bytes.empty())
        inputs->push_back(std::move(bytes));
    }
  }
  if (reader.partial())
    return call.fail({connect_code::invalid_argument, "the stream ends inside an envelope"});
  if (!selector)
    return call.fail({connect_code::invalid_argument,
                      "StreamInput starts with one start message naming the process"});
  with_process(call, *selector, [call, inputs](json process) {
    write_inputs(call, process_path(call, process, "/stdin"), inputs, 0);
  });
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
  // with_process would answer a unary error; a stream's goes in its end envelope.
  call.v1_json(
    http::verb::get, "/v1/sandboxes/" + call.sandbox_id + "/processes",
    [call, selector = request.process()](json listing) {
      for (const auto& process : listing.value("items", json::array())) {
        if (!selects(selector, process))
          continue;
        http_response head{http::status::ok, 11};
        head.set(http::field::content_type, std::string(e2b::content_type_of(call.content)));
        auto out = call.ex->open_body_stream(std::move(head), keepalive_options(call));
        auto events = std::make_shared<process_events>(call, out, process.value("pty", false));
        const uint64_t now =
          process.value("stdout_bytes", uint64_t{0}) + process.value("stderr_bytes", uint64_t{0});
        return events->start(process.value("process_id", ""), process.value("pid", 0u), now);
      }
      refuse_stream(call.ex, call.content,
                    {connect_code::not_found, "no running process " + describe(selector)});
    });
}

} // namespace airlock::gateway::envd_detail
