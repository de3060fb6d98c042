#include "tests/api/api_support.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

namespace airlock::test {

namespace {

using nlohmann::json;
using steady = std::chrono::steady_clock;

constexpr const char* airlockd_path = AIRLOCK_AIRLOCKD_PATH;

std::vector<std::string> serve_argv(const serve_process::options& opts,
                                    const std::string& data_dir) {
  std::vector<std::string> argv{airlockd_path,     "serve",
                                "--data-dir",      data_dir,
                                "--listen",        "127.0.0.1:0",
                                "--instance",      opts.instance,
                                "--veth-prefix",   opts.veth_prefix,
                                "--address-pool",  opts.address_pool,
                                "--uid-base",      std::to_string(opts.uid_base),
                                "--image-size-mb", std::to_string(opts.image_size_mb)};
  argv.insert(argv.end(), opts.extra_args.begin(), opts.extra_args.end());
  return argv;
}

} // namespace

std::string api_reply::error_code() const {
  if (!is_error_shape())
    return "";
  return json["error"]["code"].get<std::string>();
}

bool api_reply::is_error_shape() const {
  return json.is_object() && json.contains("error") && json["error"].is_object()
         && json["error"].contains("code") && json["error"]["code"].is_string()
         && json["error"].contains("message") && json["error"]["message"].is_string()
         && !json["error"]["message"].get<std::string>().empty();
}

std::unique_ptr<serve_process> serve_process::start(const options& opts, std::string& error) {
  std::unique_ptr<serve_process> out(new serve_process());
  out->options_ = opts;
  out->instance_ = opts.instance;
  out->stop_wait_ = opts.stop_wait;
  if (!out->launch(error))
    return nullptr;
  if (out->admin_key_.empty()) {
    error = "airlockd serve printed no admin key on its first start; its log:\n" + out->log();
    return nullptr;
  }
  return out;
}

bool serve_process::launch(std::string& error) {
  std::string home = dir() + "/home";
  std::vector<std::string> env{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home,
                               "XDG_CONFIG_HOME=" + dir() + "/cfg", "AIRLOCK_LOG_LEVEL=info"};
  // A restart's log replaces the earlier run's.
  process_ = child_process::spawn(serve_argv(options_, data_dir()), env, dir() + "/airlockd.log");
  if (!process_) {
    error = std::string("cannot start ") + airlockd_path;
    return false;
  }
  port_ = 0;
  while (auto line = process_->read_line(operation_wait_max)) {
    if (line->rfind("admin key: ", 0) == 0)
      admin_key_ = line->substr(11);
    if (auto bound = parse_listening(*line)) {
      host_ = bound->first;
      port_ = bound->second;
      break;
    }
  }
  if (port_ == 0) {
    error = "airlockd serve did not come up; its log:\n" + log();
    return false;
  }
  return true;
}

bool serve_process::restart(stop_kind how, std::string& error) {
  if (process_) {
    if (how == stop_kind::sigterm) {
      if (!stop()) {
        error = "airlockd did not stop after SIGTERM";
        return false;
      }
    } else {
      process_->send_signal(SIGKILL);
      (void)process_->wait_exit(stop_wait_);
    }
    process_.reset();
  }
  return launch(error);
}

std::optional<int> serve_process::stop() {
  if (!process_)
    return std::nullopt;
  process_->send_signal(SIGTERM);
  return process_->wait_exit(stop_wait_);
}

serve_process::~serve_process() {
  if (process_) {
    stop();
    process_.reset(); // SIGKILLs it if it is still running
  }
  // The btrfs loop image stays mounted by design; the test owns its mount.
  auto left = unmount_below(dir_.path());
  if (!left.empty())
    ADD_FAILURE() << "still mounted after the test: " << left.front();
  auto leftovers = remove_instance_leftovers(instance_);
  if (!leftovers.empty())
    ADD_FAILURE() << "cannot remove " << leftovers.front();
}

std::string serve_process::log() const { return read_file(dir_.path() + "/airlockd.log"); }

api_reply api_client::call(const std::string& method, const std::string& target,
                           const std::string& body,
                           std::vector<std::pair<std::string, std::string>> headers,
                           milliseconds timeout) const {
  http_request request;
  request.method = method;
  request.target = target;
  request.body = body;
  if (!credential_.empty())
    request.headers.emplace_back("Authorization", "Bearer " + credential_);
  const bool typed = std::any_of(headers.begin(), headers.end(),
                                 [](const auto& header) { return header.first == "Content-Type"; });
  if (!body.empty() && !typed)
    request.headers.emplace_back("Content-Type", "application/json");
  for (auto& header : headers)
    request.headers.push_back(std::move(header));
  api_reply out;
  auto reply = http_call(host_, port_, request, timeout);
  if (!reply)
    return out;
  out.status = reply->status;
  out.headers = std::move(reply->headers);
  out.body = std::move(reply->body);
  if (auto type = out.headers.find("content-type");
      type != out.headers.end() && type->second.find("json") != std::string::npos)
    out.json = json::parse(out.body, nullptr, false);
  if (out.json.is_discarded())
    out.json = nullptr;
  return out;
}

std::optional<std::pair<http_connection, http_reply>>
api_client::open_stream(const std::string& target,
                        std::vector<std::pair<std::string, std::string>> headers) const {
  http_request request;
  request.target = target;
  bool has_auth = false;
  for (const auto& [name, value] : headers)
    has_auth = has_auth || name == "Authorization";
  if (!credential_.empty() && !has_auth)
    request.headers.emplace_back("Authorization", "Bearer " + credential_);
  for (auto& header : headers)
    request.headers.push_back(std::move(header));
  return http_open(host_, port_, request);
}

api_reply api_client::create(const json& spec) const {
  return call("POST", "/v1/sandboxes", spec.dump());
}

json api_client::wait_operation(const std::string& operation_id) const {
  auto deadline = steady::now() + operation_wait_max;
  json last;
  while (steady::now() < deadline) {
    auto reply = get("/v1/operations/" + operation_id + "?wait=30");
    if (reply.status != 200)
      return reply.json;
    last = reply.json;
    auto state = last.value("state", "");
    if (state != "pending" && state != "running")
      return last;
  }
  return last;
}

std::string api_client::create_running(const json& extra) const {
  auto created = create(small_spec(extra));
  if (created.status != 202) {
    ADD_FAILURE() << "create answered " << created.status << ": " << created.body;
    return "";
  }
  auto op = wait_operation(created.json.value("operation_id", ""));
  if (op.value("state", "") != "succeeded") {
    ADD_FAILURE() << "create did not succeed: " << op.dump();
    return "";
  }
  return created.json.value("sandbox_id", "");
}

std::optional<started_process> api_client::exec(const std::string& sandbox_id,
                                                const json& body) const {
  auto reply = call("POST", "/v1/sandboxes/" + sandbox_id + "/processes", body.dump());
  if (reply.status != 201) {
    ADD_FAILURE() << "exec answered " << reply.status << ": " << reply.body;
    return std::nullopt;
  }
  started_process out;
  out.process_id = reply.json.value("process_id", "");
  out.attach_path = path_of_url(reply.json.value("attach_url", ""));
  out.attach_token = reply.json.value("attach_token", "");
  return out;
}

void collect_event(process_output& out, const sse_event& event) {
  out.events.push_back(event);
  if (event.event == "exit") {
    out.exit = json::parse(event.data, nullptr, false);
    out.last_id = event.id;
    return;
  }
  if (event.event != "stdout" && event.event != "stderr")
    return;
  auto chunk = json::parse(event.data, nullptr, false);
  if (!chunk.is_object() || !chunk.contains("data"))
    return;
  std::string bytes = chunk["data"].get<std::string>();
  if (chunk.value("encoding", "") == "base64")
    bytes = base64_decode(bytes).value_or("<bad base64>");
  (event.event == "stdout" ? out.stdout_bytes : out.stderr_bytes) += bytes;
  out.last_id = event.id;
}

process_output api_client::read_output(const started_process& process, const std::string& query,
                                       std::vector<std::pair<std::string, std::string>> headers,
                                       milliseconds timeout) const {
  process_output out;
  headers.emplace_back("Authorization", "Bearer " + process.attach_token);
  auto stream = open_stream(process.attach_path + "/output" + query, std::move(headers));
  if (!stream || stream->second.status != 200) {
    ADD_FAILURE() << "output stream answered " << (stream ? stream->second.status : 0);
    return out;
  }
  auto deadline = steady::now() + timeout;
  while (!out.exit && steady::now() < deadline) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
    auto event = stream->first.next_event(left);
    if (!event)
      break;
    collect_event(out, *event);
  }
  out.ended = stream->first.wait_closed(milliseconds(5'000));
  return out;
}

process_output api_client::run(const std::string& sandbox_id, const std::string& cmd) const {
  auto process = exec(sandbox_id, {{"cmd", cmd}});
  if (!process)
    return {};
  return read_output(*process);
}

json small_spec(const json& extra) {
  json spec = {{"template", "minimal"}, {"cpu_millis", 100}, {"memory_mb", 128}};
  for (const auto& [key, value] : extra.items())
    spec[key] = value;
  return spec;
}

std::optional<std::string> base64_decode(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  if (text.size() % 4 != 0)
    return std::nullopt;
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=')
      break;
    int v = value(c);
    if (v < 0)
      return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out += static_cast<char>((bits >> 16) & 0xFF);
      out += static_cast<char>((bits >> 8) & 0xFF);
      out += static_cast<char>(bits & 0xFF);
      bits = 0;
      count = 0;
    }
  }
  if (count == 2) {
    out += static_cast<char>((bits >> 4) & 0xFF);
  } else if (count == 3) {
    out += static_cast<char>((bits >> 10) & 0xFF);
    out += static_cast<char>((bits >> 2) & 0xFF);
  }
  return out;
}

std::string path_of_url(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos)
    return url;
  auto slash = url.find('/', scheme + 3);
  return slash == std::string::npos ? "/" : url.substr(slash);
}

} // namespace airlock::test
