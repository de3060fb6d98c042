#pragma once
// Internal to gateway/: what envd's route files share (e2b_envd_routes.cpp
// dispatches, e2b_envd_process.cpp serves process.Process,
// e2b_envd_files.cpp the filesystem calls and /files). e2b_envd_routes.hpp
// is the contract.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <functional>
#include <google/protobuf/util/time_util.h>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/clock.hpp"
#include "e2b/connect.hpp"
#include "e2b/envd/filesystem/filesystem.pb.h"
#include "e2b/envd/process/process.pb.h"
#include "gateway/e2b_envd_routes.hpp"
#include "gateway/e2b_token_book.hpp"
#include "gateway/exchange.hpp"
#include "gateway/internal_call.hpp"

namespace airlock::gateway::envd_detail {

using e2b::connect_code;
using e2b::connect_error;
using nlohmann::json;
using exchange_ptr = std::shared_ptr<exchange>;
namespace pb = google::protobuf;

/// Whether each sandbox has the default user's account (its home exists),
/// learnt once per sandbox; bounded (forgotten wholesale when full).
class default_user_cache {
public:
  std::optional<bool> get(const std::string& sandbox_id) const {
    std::lock_guard lock(mutex_);
    auto found = known_.find(sandbox_id);
    return found == known_.end() ? std::nullopt : std::optional<bool>(found->second);
  }
  void put(const std::string& sandbox_id, bool has_user) {
    std::lock_guard lock(mutex_);
    if (known_.size() >= entries_max)
      known_.clear();
    known_[sandbox_id] = has_user;
  }
  static constexpr size_t entries_max = 10000;

private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, bool> known_;
};
struct envd_call;
class watcher_table;

struct envd_api {
  std::shared_ptr<const route_table> inner;
  e2b_envd_options options;
  /// The tokens the E2B front handed out (signed URLs); may be null.
  std::shared_ptr<const envd_token_book> tokens;
  const wall_clock* clock = nullptr;
  std::shared_ptr<default_user_cache> accounts = std::make_shared<default_user_cache>();
  /// CreateWatcher's watchers (e2b_envd_watch.cpp).
  std::shared_ptr<watcher_table> watchers;
};

/// Whose call it is: the Linux user it runs as and where its relative paths
/// point. Root unless the call names a user or the sandbox has the default one.
struct envd_account {
  std::string user = "root";
  std::string home = "/root";
  bool is_root() const { return user == "root"; }
};

/// The account of a user name: root's, or a home under /home (as E2B's
/// templates make them).
inline envd_account account_named(const std::string& user) {
  if (user.empty() || user == "root")
    return {};
  return {user, "/home/" + user};
}

using envd_ptr = std::shared_ptr<const envd_api>;

inline std::optional<std::string> header(const exchange& ex, std::string_view name) {
  auto found = ex.request().find(boost::beast::string_view(name.data(), name.size()));
  if (found == ex.request().end() || found->value().empty())
    return std::nullopt;
  return std::string(found->value());
}

inline http_response connect_failure(const connect_error& error) {
  http_response response{static_cast<http::status>(e2b::http_status_of(error.code)), 11};
  response.set(http::field::content_type, "application/json");
  response.body() = e2b::unary_error_body(error);
  return response;
}

/// Connect's code for a /v1 answer that failed, by its status.
inline connect_code code_of_status(unsigned status) {
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

inline connect_error error_of(const http_response& answer) {
  return {code_of_status(answer.result_int()), error_message_of(answer)};
}

/// "-rwxr-xr-x" for a type and permission bits.
inline std::string permissions_text(filesystem::FileType type, uint32_t mode) {
  std::string out = type == filesystem::FILE_TYPE_DIRECTORY ? "d"
                    : type == filesystem::FILE_TYPE_SYMLINK ? "l"
                                                            : "-";
  const char* letters = "rwxrwxrwx";
  for (int bit = 8; bit >= 0; --bit)
    out.push_back((mode >> bit) & 1 ? letters[8 - bit] : '-');
  return out;
}

inline filesystem::FileType file_type_of(const std::string& type) {
  if (type == "file")
    return filesystem::FILE_TYPE_FILE;
  if (type == "dir")
    return filesystem::FILE_TYPE_DIRECTORY;
  if (type == "symlink")
    return filesystem::FILE_TYPE_SYMLINK;
  return filesystem::FILE_TYPE_UNSPECIFIED;
}

/// The /v1 file entry `entry` (at `path`) as envd's EntryInfo.
inline void fill_entry(const json& entry, const std::string& path, filesystem::EntryInfo& out) {
  out.set_name(entry.value("name", path.substr(path.rfind('/') + 1)));
  out.set_type(file_type_of(entry.value("type", "")));
  out.set_path(path);
  out.set_size(entry.value("size_bytes", int64_t{0}));
  const uint32_t mode = entry.value("mode", 0u) & 07777;
  out.set_mode(mode);
  out.set_permissions(permissions_text(out.type(), mode));
  out.set_owner(entry.value("owner", ""));
  out.set_group(entry.value("group", ""));
  if (auto modified = entry.find("modified_at"); modified != entry.end() && modified->is_string())
    (void)pb::util::TimeUtil::FromString(modified->get<std::string>(), out.mutable_modified_time());
  if (auto target = entry.find("symlink_target"); target != entry.end() && target->is_string())
    out.set_symlink_target(target->get<std::string>());
}

/// A stream's answer when it fails before its first message: 200, then only
/// the end-of-stream envelope with the error (Connect puts a stream's errors there).
inline void refuse_stream(const exchange_ptr& ex, e2b::connect_content content,
                          connect_error error) {
  http_response response{http::status::ok, 11};
  response.set(http::field::content_type, std::string(e2b::content_type_of(content)));
  response.body() = e2b::end_of_stream(error);
  ex->respond(std::move(response));
}

/// A path as a user with home `home` means it: a relative one is under the home.
inline std::string resolve_under(const std::string& home, const std::string& path) {
  if (!path.empty() && path.front() == '/')
    return path;
  return home + (path.empty() ? "" : "/" + path);
}

/// One envd call: its exchange, sandbox, token and codec.
struct envd_call {
  envd_ptr api;
  exchange_ptr ex;
  std::string sandbox_id;
  std::string token;
  e2b::connect_content content;
  envd_account account; ///< set by with_account before the call is served

  std::string files(std::string_view suffix, const std::string& path) const {
    return "/v1/sandboxes/" + sandbox_id + "/files" + std::string(suffix)
           + "?path=" + percent_encode(path, true);
  }

  std::string resolve(const std::string& path) const { return resolve_under(account.home, path); }

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

/// A stream's options: no SSE heartbeat, but `keepalive` (a whole envelope of
/// the stream's codec) after `Keepalive-Ping-Interval` seconds of silence (the
/// SDK sends 50; default 50, 1..3600), so that clients whose body timeout
/// ends silent streams (undici: 300 s) keep a quiet command's stream.
inline sse_options stream_keepalive(const envd_call& call, const pb::Message& keepalive) {
  sse_options options;
  uint32_t seconds = 50;
  if (auto asked = header(*call.ex, "Keepalive-Ping-Interval")) {
    uint32_t value = 0;
    auto [end, failed] = std::from_chars(asked->data(), asked->data() + asked->size(), value);
    if (failed == std::errc{} && end == asked->data() + asked->size())
      seconds = std::clamp<uint32_t>(value, 1, 3600);
  }
  options.heartbeat_ms = seconds * 1000;
  if (auto bytes = e2b::encode_message(call.content.codec, keepalive))
    options.heartbeat_bytes = e2b::envelope(0, *bytes);
  else
    options.heartbeat_ms = 0;
  return options;
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

// Accounts (e2b_envd_routes.cpp).
/// The user an RPC names: Basic auth "<user>:" (the SDK's `user` option).
std::optional<std::string> rpc_user(const exchange& ex);
/// `then` with `call` whose account is `asked`'s, else the default user's
/// when the sandbox has that account, else root's.
void with_account(envd_call call, std::optional<std::string> asked,
                  std::function<void(envd_call)> then);
/// Gives `path` (and its new ancestors inside the account's home) to the
/// call's account when it is not root: the data plane writes as root, and
/// E2B code expects to own what it wrote. `then` with the error, if any.
void give_to_account(const envd_call& call, const std::string& path,
                     std::function<void(std::optional<connect_error>)> then);

// filesystem.Filesystem's unary calls and /files (e2b_envd_files.cpp).
void fs_stat(const envd_call& call, const pb::Message& message);
void fs_list(const envd_call& call, const pb::Message& message);
void fs_make_dir(const envd_call& call, const pb::Message& message);
void fs_remove(const envd_call& call, const pb::Message& message);
void fs_move(const envd_call& call, const pb::Message& message);
/// GET /e2b/envd/files: the file, streamed from the data plane's download.
void download(const envd_ptr& api, const exchange_ptr& ex);
/// POST /e2b/envd/files: multipart or octet-stream, written file by file.
void upload(const envd_ptr& api, const exchange_ptr& ex);

// filesystem.Filesystem's watches (e2b_envd_watch.cpp).
void fs_watch_dir(const envd_call& call, const filesystem::WatchDirRequest& request);
void fs_create_watcher(const envd_call& call, const pb::Message& message);
void fs_get_watcher_events(const envd_call& call, const pb::Message& message);
void fs_remove_watcher(const envd_call& call, const pb::Message& message);

/// The watchers of CreateWatcher: each an in-process /v1 watch whose
/// changes wait (at most watcher_events_max) for GetWatcherEvents. A watcher
/// belongs to the sandbox and token that created it; one not polled for
/// watcher_idle_ms is stopped at the next call of any watcher. Thread-safe.
class watcher_table : public std::enable_shared_from_this<watcher_table> {
public:
  watcher_table(const wall_clock& clock, e2b_envd_options options);
  ~watcher_table();
  /// Answers {watcherId} once the directory is watched, or the error.
  void create(const envd_call& call, const filesystem::CreateWatcherRequest& request);
  /// Answers the events since the last call; once the watch ended and they
  /// were taken, the reason (and the watcher is gone).
  void events(const envd_call& call, const std::string& id);
  void remove(const envd_call& call, const std::string& id);
  size_t size() const;

private:
  struct watcher;
  void on_event(const std::string& id, const internal_event& event);
  void on_end(const std::string& id, std::optional<connect_error> error);
  /// Takes the watchers idle past their time out of the table.
  std::vector<std::shared_ptr<internal_stream>> sweep_locked(int64_t now);
  static void stop_all(const std::vector<std::shared_ptr<internal_stream>>& streams);

  const wall_clock& clock_;
  const e2b_envd_options options_;
  mutable std::mutex mutex_;
  std::map<std::string, watcher> watchers_;
  uint64_t next_id_ = 0;
};

// process.Process (e2b_envd_process.cpp).
void process_start(const envd_call& call, const process::StartRequest& request);
void process_connect(const envd_call& call, const process::ConnectRequest& request);
void process_list(const envd_call& call, const pb::Message& message);
void process_send_input(const envd_call& call, const pb::Message& message);
/// StreamInput, a client stream: a start naming the process, then inputs.
void process_stream_input(const envd_call& call);
void process_close_stdin(const envd_call& call, const pb::Message& message);
void process_send_signal(const envd_call& call, const pb::Message& message);
void process_update(const envd_call& call, const pb::Message& message);

} // namespace airlock::gateway::envd_detail
