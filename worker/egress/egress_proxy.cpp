#include "worker/egress/egress_proxy.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "crypto/certificates.hpp"

namespace airlock::worker::egress {
namespace {

namespace net = boost::asio;
using net::ip::tcp;

result<std::vector<cidr>> parse_cidrs(const std::vector<std::string>& texts) {
  std::vector<cidr> ranges;
  for (const auto& text : texts) {
    auto range = parse_cidr(text);
    if (!range)
      return range.error();
    ranges.push_back(*range);
  }
  return ranges;
}

result<std::unique_ptr<name_resolver>> make_resolver(const std::string& hosts_file) {
  if (hosts_file.empty())
    return std::unique_ptr<name_resolver>(std::make_unique<system_resolver>());
  auto resolver = static_resolver::from_file(hosts_file);
  if (!resolver)
    return resolver.error();
  return std::unique_ptr<name_resolver>(std::move(resolver.value()));
}

/// The executor a new connection runs on: its own strand when several
/// threads run the io_context; with one thread the io_context itself, since
/// a strand there only adds a queue and a lock to every completion.
net::any_io_executor connection_executor(net::io_context& io, bool strands) {
  if (strands)
    return net::make_strand(io);
  return io.get_executor();
}

/// Accepts connections until the acceptor closes.
net::awaitable<void> accept_loop(tcp::acceptor& acceptor, connection_proxy& proxy,
                                 net::io_context& io, bool strands) {
  for (;;) {
    boost::system::error_code ec;
    auto executor = connection_executor(io, strands);
    auto socket =
      co_await acceptor.async_accept(executor, net::redirect_error(net::use_awaitable, ec));
    if (!acceptor.is_open() || ec == net::error::operation_aborted)
      co_return;
    if (ec) {
      // Out of descriptors or memory: back off instead of spinning.
      net::steady_timer pause{io, std::chrono::milliseconds(50)};
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    proxy.serve(std::move(socket));
  }
}

result<std::unique_ptr<tcp::acceptor>> listen(net::io_context& io, const std::string& address,
                                              uint16_t port, int backlog) {
  boost::system::error_code ec;
  auto bind_address = net::ip::make_address_v4(address, ec);
  if (ec)
    return make_status(errc::invalid_argument, "bad bind address " + address);
  auto acceptor = std::make_unique<tcp::acceptor>(io);
  tcp::endpoint endpoint{bind_address, port};
  acceptor->open(endpoint.protocol(), ec);
  if (!ec)
    acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    acceptor->bind(endpoint, ec);
  if (!ec)
    acceptor->listen(backlog, ec);
  if (ec)
    return make_status(errc::unavailable, "egress proxy cannot listen on " + address + ":"
                                            + std::to_string(port) + ": " + ec.message());
  return acceptor;
}

} // namespace

result<std::unique_ptr<egress_proxy>>
egress_proxy::start(egress_proxy_options options, std::shared_ptr<audit_sink> audit,
                    std::shared_ptr<credential_source> credentials) {
  if (!audit)
    return make_status(errc::invalid_argument, "egress proxy needs an audit sink");
  std::unique_ptr<egress_proxy> egress{new egress_proxy()};
  if (auto opened = egress->open(options, std::move(audit), std::move(credentials)); !opened) {
    egress->stop();
    return opened;
  }
  for (std::size_t i = 0; i < std::max<std::size_t>(1, options.network_threads); ++i)
    egress->threads_.emplace_back([io = egress->io_.get()] { io->run(); });
  return egress;
}

status egress_proxy::open(egress_proxy_options& options, std::shared_ptr<audit_sink> audit,
                          std::shared_ptr<credential_source> credentials) {
  audit_ = std::move(audit);
  auto allowed = parse_cidrs(options.allowed_private);
  if (!allowed)
    return allowed.error();
  auto denied = parse_cidrs(options.denied);
  if (!denied)
    return denied.error();
  filter_ = std::make_unique<address_filter>(std::move(allowed.value()), std::move(denied.value()));
  auto resolver = make_resolver(options.hosts_file);
  if (!resolver)
    return resolver.error();
  sandboxes_ = std::make_unique<sandbox_table>();
  resolver_ = std::make_unique<resolver_pool>(std::move(resolver.value()), options.resolver);
  auto proxy = connection_proxy::create(
    options.connection,
    connection_proxy::parts{sandboxes_.get(), resolver_.get(), *filter_, audit_,
                            std::move(credentials), options.original_destination});
  if (!proxy)
    return proxy.error();
  connections_ = std::move(proxy.value());
  io_ = std::make_unique<net::io_context>(
    static_cast<int>(std::max<std::size_t>(1, options.network_threads)));
  auto acceptor = listen(*io_, options.bind_address, options.proxy_port, options.listen_backlog);
  if (!acceptor)
    return acceptor.error();
  acceptor_ = std::move(acceptor.value());
  proxy_port_ = acceptor_->local_endpoint().port();
  options.dns.bind_address = options.bind_address;
  options.dns.port = options.dns_port;
  auto dns =
    dns_server::start(io_->get_executor(), *sandboxes_, *resolver_, *filter_, *audit_, options.dns);
  if (!dns)
    return dns.error();
  dns_ = std::move(dns.value());
  dns_port_ = dns_->port();
  bool strands = options.network_threads > 1;
  net::co_spawn(*io_, accept_loop(*acceptor_, *connections_, *io_, strands),
                [](std::exception_ptr) {});
  return status::ok();
}

egress_proxy::~egress_proxy() { stop(); }

void egress_proxy::stop() {
  if (stopped_)
    return;
  stopped_ = true;
  if (connections_)
    connections_->close(); // credential callbacks stop reaching the threads
  dns_.reset();
  if (io_)
    io_->stop();
  for (auto& thread : threads_)
    thread.join();
  threads_.clear();
  acceptor_.reset();
  // Joins the resolver threads; answers they post land in the stopped
  // io_context and are destroyed with it below.
  resolver_.reset();
  io_.reset();
}

uint16_t egress_proxy::proxy_port() const { return proxy_port_; }
uint16_t egress_proxy::dns_port() const { return dns_port_; }

status egress_proxy::set_authority(std::string intermediate_key_pem, std::string chain_pem) {
  auto minter = crypto::leaf_minter::create(std::move(intermediate_key_pem), std::move(chain_pem));
  if (!minter)
    return minter.error();
  connections_->set_minter(std::shared_ptr<crypto::leaf_minter>(std::move(minter.value())));
  return status::ok();
}

void egress_proxy::attach(sandbox_view sandbox) { sandboxes_->put(std::move(sandbox)); }

void egress_proxy::detach(std::string_view address) {
  if (auto parsed = parse_ipv4(address)) {
    if (auto view = sandboxes_->find(*parsed))
      connections_->forget_credentials(view->sandbox_id);
  }
  sandboxes_->remove(address);
}

egress_stats egress_proxy::stats() const { return connections_->stats(); }

dns_server_stats egress_proxy::dns_stats() const {
  return dns_ ? dns_->stats() : dns_server_stats{};
}

} // namespace airlock::worker::egress
