#include "tests/cli/fake_api.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>

namespace airlock::cli::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

fake_api::fake_api(handler on_request)
    : on_request_(std::move(on_request)),
      acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
  port_ = acceptor_.local_endpoint().port();
  acceptor_thread_ = std::thread([this] { accept_loop(); });
}

fake_api::~fake_api() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  // Wake the blocking accept with a connection of our own.
  beast::error_code ec;
  tcp::socket poke(io_);
  poke.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
  acceptor_thread_.join();
  std::vector<std::thread> connections;
  {
    std::lock_guard lock(mutex_);
    connections.swap(connections_);
  }
  for (auto& thread : connections)
    thread.join();
}

std::string fake_api::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<recorded_request> fake_api::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

void fake_api::accept_loop() {
  for (;;) {
    tcp::socket socket(io_);
    beast::error_code ec;
    acceptor_.accept(socket, ec);
    std::lock_guard lock(mutex_);
    if (stopping_)
      return;
    if (!ec)
      connections_.emplace_back([this, s = std::move(socket)]() mutable { serve(std::move(s)); });
  }
}

void fake_api::serve(socket_t socket) {
  beast::flat_buffer buffer;
  request_t request;
  beast::error_code ec;
  http::read(socket, buffer, request, ec);
  if (ec)
    return;
  {
    std::lock_guard lock(mutex_);
    requests_.push_back({std::string(request.method_string()), std::string(request.target()),
                         std::string(request[http::field::authorization]),
                         std::string(request["Last-Event-ID"]), request.body()});
  }
  on_request_(request, socket);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

void write_bytes(socket_t& socket, int status, const std::string& body) {
  http::response<http::string_body> response{static_cast<http::status>(status), 11};
  response.set(http::field::content_type, "application/octet-stream");
  response.set(http::field::connection, "close");
  response.body() = body;
  response.prepare_payload();
  beast::error_code ec;
  http::write(socket, response, ec);
}

void write_json(socket_t& socket, int status, const nlohmann::json& body) {
  http::response<http::string_body> response{static_cast<http::status>(status), 11};
  response.set(http::field::content_type, "application/json");
  response.set(http::field::connection, "close");
  response.body() = body.dump();
  response.prepare_payload();
  beast::error_code ec;
  http::write(socket, response, ec);
}

void write_raw(socket_t& socket, const std::string& bytes) {
  beast::error_code ec;
  asio::write(socket, asio::buffer(bytes), ec);
}

std::string sse_head() {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
         "Connection: close\r\n\r\n";
}

std::string sse_event(const std::string& event, const nlohmann::json& data, const std::string& id) {
  return "event: " + event + "\nid: " + id + "\ndata: " + data.dump() + "\n\n";
}

} // namespace airlock::cli::test
