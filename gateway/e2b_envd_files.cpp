// envd's filesystem calls and /files, made of the data plane's own file routes.

#include <zlib.h>

#include <algorithm>
#include <charconv>

#include "gateway/e2b_envd_internal.hpp"

namespace airlock::gateway::envd_detail {

void fs_stat(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const filesystem::StatRequest&>(message);
  call.stat(call.resolve(request.path()), [call](filesystem::EntryInfo info) {
    filesystem::StatResponse response;
    *response.mutable_entry() = std::move(info);
    call.reply(response);
  });
}

namespace {

/// ListDir's walk: directories listed one at a time through the data plane,
/// to `depth` levels, at most `entries_max` entries in all.
struct list_walk : std::enable_shared_from_this<list_walk> {
  envd_call call;
  uint32_t depth = 1;
  size_t entries_max = 0;
  std::vector<std::pair<std::string, uint32_t>> pending; ///< directory, its level
  filesystem::ListDirResponse response;

  void next() {
    if (pending.empty())
      return call.reply(response);
    auto [dir, level] = std::move(pending.back());
    pending.pop_back();
    auto self = shared_from_this();
    call.v1_json(http::verb::get, call.files("/list", dir), [self, dir, level](json listing) {
      for (const auto& entry : listing.value("items", json::array())) {
        auto name = entry.value("name", "");
        filesystem::EntryInfo info;
        fill_entry(entry, dir == "/" ? "/" + name : dir + "/" + name, info);
        if (info.type() == filesystem::FILE_TYPE_UNSPECIFIED)
          continue; // envd lists files, directories and links
        if (self->response.entries_size() >= static_cast<int>(self->entries_max))
          return self->call.fail({connect_code::resource_exhausted,
                                  "the listing holds more than " + std::to_string(self->entries_max)
                                    + " entries: list with a smaller depth or a deeper path"});
        if (info.type() == filesystem::FILE_TYPE_DIRECTORY && level < self->depth)
          self->pending.emplace_back(info.path(), level + 1);
        *self->response.add_entries() = std::move(info);
      }
      self->next();
    });
  }
};

} // namespace

void fs_list(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const filesystem::ListDirRequest&>(message);
  auto walk = std::make_shared<list_walk>();
  walk->call = call;
  walk->depth = std::max<uint32_t>(request.depth(), 1);
  walk->entries_max = call.api->options.list_entries_max;
  walk->pending.emplace_back(call.resolve(request.path()), 1);
  walk->next();
}

void fs_move(const envd_call& call, const pb::Message& message) {
  const auto& request = static_cast<const filesystem::MoveRequest&>(message);
  auto from = call.resolve(request.source());
  auto to = call.resolve(request.destination());
  auto target = call.files("/move", from) + "&to=" + percent_encode(to, true);
  call.v1(http::verb::post, target, {}, [call, to](http_response moved) {
    if (moved.result_int() >= 300)
      return call.fail(error_of(moved));
    call.stat(to, [call](filesystem::EntryInfo info) {
      filesystem::MoveResponse response;
      *response.mutable_entry() = std::move(info);
      call.reply(response);
    });
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
      give_to_account(call, path, [call, path](std::optional<connect_error> failed) {
        if (failed)
          return call.fail(*failed);
        call.stat(path, [call](filesystem::EntryInfo info) {
          filesystem::MakeDirResponse response;
          *response.mutable_entry() = std::move(info);
          call.reply(response);
        });
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

/// The sandbox and token of a /files request, from its headers or from its
/// signature (`operation` is what a signature must allow: "read" or "write");
/// nullopt after answering.
std::optional<std::pair<std::string, std::string>>
files_access(const envd_api& api, const exchange_ptr& ex, std::string_view operation) {
  auto sandbox = header(*ex, "E2b-Sandbox-Id");
  auto token = header(*ex, "X-Access-Token");
  if (sandbox && token)
    return std::pair{*sandbox, *token};
  auto signature = ex->query("signature");
  if (!signature) {
    ex->respond(files_error(401, "send E2b-Sandbox-Id and X-Access-Token, or use a signed URL "
                                 "(the SDK's uploadUrl or downloadUrl)"));
    return std::nullopt;
  }
  signed_file_request request{std::string(ex->query("path").value_or("")), std::string(operation),
                              std::string(ex->query("username").value_or("")), *signature,
                              std::string(ex->query("signature_expiration").value_or(""))};
  const int64_t now_ms = api.clock ? api.clock->now_ms() : 0;
  if (!request.expiration.empty()) {
    int64_t expires_s = 0;
    auto [end, failed] = std::from_chars(
      request.expiration.data(), request.expiration.data() + request.expiration.size(), expires_s);
    if (failed != std::errc{} || end != request.expiration.data() + request.expiration.size()) {
      ex->respond(files_error(400, "signature_expiration must be Unix seconds"));
      return std::nullopt;
    }
    if (expires_s * 1000 <= now_ms) {
      ex->respond(files_error(401, "signature is already expired"));
      return std::nullopt;
    }
  }
  auto found = api.tokens ? api.tokens->find(request, now_ms) : std::nullopt;
  if (!found) {
    ex->respond(files_error(
      401, "the signature matches no envd token this server handed out: sign the URL again with "
           "the token of a current Sandbox.create or Sandbox.connect (tokens handed out before "
           "the control plane restarted are not kept)"));
    return std::nullopt;
  }
  // A host-name address names its sandbox too: the signature must be its.
  if (sandbox && *sandbox != found->sandbox_id) {
    ex->respond(files_error(401, "the signature is for another sandbox than " + *sandbox));
    return std::nullopt;
  }
  return std::pair{found->sandbox_id, found->token};
}

/// The call of a /files request, as the account its ?username= names (else
/// the default one); nullopt after answering.
void files_call(const envd_ptr& api, const exchange_ptr& ex, std::string_view operation,
                std::function<void(envd_call)> then) {
  auto access = files_access(*api, ex, operation);
  if (!access)
    return;
  envd_call call{api, ex, access->first, access->second, {}, {}};
  auto username = ex->query("username");
  with_account(std::move(call),
               username && !username->empty() ? std::optional<std::string>(*username)
                                              : std::nullopt,
               std::move(then));
}

void download_as(const envd_call& call, const std::string& path);

void download(const envd_ptr& api, const exchange_ptr& ex) {
  auto path = ex->query("path");
  if (!path || path->empty())
    return ex->respond(files_error(400, "path is required"));
  files_call(api, ex, "read", [path = *path](envd_call call) { download_as(call, path); });
}

void download_as(const envd_call& call, const std::string& path) {
  const auto& api = call.api;
  const auto& ex = call.ex;
  const auto target = call.files("", call.resolve(path));
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
    call_stream_route(*api->inner, http::verb::get, target, call.token, std::move(handlers));
}

/// The bytes of a gzip body, at most `max` of them: resource_exhausted past
/// it (a small body may inflate to a huge one), invalid_argument when it is
/// not gzip.
result<std::string> gunzip(std::string_view compressed, size_t max) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK)
    return make_status(errc::internal, "cannot start a gzip decoder");
  std::string out;
  char buffer[64 * 1024];
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  int state = Z_OK;
  while (state != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    state = inflate(&stream, Z_NO_FLUSH);
    if (state != Z_OK && state != Z_STREAM_END) {
      inflateEnd(&stream);
      return make_status(errc::invalid_argument,
                         "the body is not valid gzip (Content-Encoding: gzip)");
    }
    out.append(buffer, sizeof buffer - stream.avail_out);
    if (out.size() > max) {
      inflateEnd(&stream);
      return make_status(errc::resource_exhausted,
                         "the gzip body inflates to more than " + std::to_string(max) + " bytes");
    }
    if (state == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      return make_status(errc::invalid_argument, "the gzip body ends early");
    }
  }
  inflateEnd(&stream);
  return out;
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

/// Writes the parts one after the other (each given to the call's account),
/// then answers envd's list of entries.
void write_parts(const envd_call& call, std::shared_ptr<std::vector<upload_part>> parts,
                 size_t next, json written) {
  if (next == parts->size())
    return call.ex->respond(json_response(http::status::ok, written));
  auto& part = (*parts)[next];
  const auto path = call.resolve(part.path);
  call.v1(http::verb::put, call.files("", path), std::move(part.bytes),
          [call, parts, next, path, written = std::move(written)](http_response answer) mutable {
            if (answer.result_int() >= 300)
              return call.ex->respond(files_error_of(answer));
            give_to_account(
              call, path,
              [call, parts, next, path,
               written = std::move(written)](std::optional<connect_error> failed) mutable {
                if (failed)
                  return call.ex->respond(files_error(500, failed->message));
                written.push_back(
                  {{"name", path.substr(path.rfind('/') + 1)}, {"path", path}, {"type", "file"}});
                write_parts(call, parts, next + 1, std::move(written));
              });
          });
}

void upload(const envd_ptr& api, const exchange_ptr& ex) {
  for (const auto& field : ex->request())
    if (field.name_string().size() > 11
        && boost::beast::iequals(field.name_string().substr(0, 11), "X-Metadata-"))
      return ex->respond(files_error(
        400, "file metadata (" + std::string(field.name_string())
               + ") is not supported by airlock: write the file without it (docs/e2b.md)"));
  std::string body = std::move(ex->request().body());
  if (auto encoding = header(*ex, "Content-Encoding"); encoding && *encoding != "identity") {
    if (*encoding != "gzip")
      return ex->respond(files_error(400, "Content-Encoding " + *encoding
                                            + " is not supported: send gzip or plain bytes"));
    auto inflated = gunzip(body, api->options.upload_bytes_max);
    if (!inflated)
      return ex->respond(files_error(inflated.code() == errc::resource_exhausted ? 413 : 400,
                                     inflated.error().message));
    body = std::move(*inflated);
  }
  const auto content_type = header(*ex, "Content-Type").value_or("");
  auto parts = std::make_shared<std::vector<upload_part>>();
  auto query_path = ex->query("path");
  if (content_type.rfind("multipart/form-data", 0) == 0) {
    auto parsed = multipart_parts(content_type, body);
    if (!parsed)
      return ex->respond(files_error(400, parsed.error().message));
    *parts = std::move(*parsed);
    // One file with ?path=: that is where it goes.
    if (parts->size() == 1 && query_path && !query_path->empty())
      parts->front().path = *query_path;
  } else {
    if (!query_path || query_path->empty())
      return ex->respond(files_error(400, "path is required for an octet-stream upload"));
    parts->push_back({*query_path, std::move(body)});
  }
  for (const auto& part : *parts)
    if (part.path.empty())
      return ex->respond(files_error(400, "a part has no filename: name its destination path"));
  files_call(api, ex, "write",
             [parts](envd_call call) { write_parts(call, parts, 0, json::array()); });
}

} // namespace airlock::gateway::envd_detail
