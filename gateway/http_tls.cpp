// http_server's TLS: the context read from the certificate and key files, and
// its reload when the files change (a renewed certificate is picked up without
// a restart, as the cluster's member certificates are renewed in place).

#include <sys/stat.h>

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

#include "gateway/http_server_state.hpp"

namespace airlock::gateway {

namespace {

/// How often a new connection may look whether the files changed.
constexpr milliseconds tls_check_interval{1000};

/// What identifies the files' contents cheaply: inode, size and change time
/// of each (a rename over the file, as atomic replacement does, changes all).
std::string files_stamp(const http_tls_files& files) {
  std::string stamp;
  for (const auto* path : {&files.certificate_file, &files.key_file}) {
    struct stat info {};
    if (::stat(path->c_str(), &info) != 0) {
      stamp += "missing;";
      continue;
    }
    stamp += std::to_string(info.st_ino) + ":" + std::to_string(info.st_size) + ":"
             + std::to_string(info.st_ctim.tv_sec) + "." + std::to_string(info.st_ctim.tv_nsec)
             + ";";
  }
  return stamp;
}

} // namespace

result<std::shared_ptr<net::ssl::context>> load_tls_context(const http_tls_files& files) {
  auto context = std::make_shared<net::ssl::context>(net::ssl::context::tls_server);
  boost::system::error_code ec;
  auto failed = [&](const std::string& what) {
    return make_status(errc::invalid_argument, "TLS: cannot use " + what + ": " + ec.message());
  };
  context->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2
                         | net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1
                         | net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use,
                       ec);
  if (ec)
    return failed("the protocol options");
  if (context->use_certificate_chain_file(files.certificate_file, ec); ec)
    return failed("the certificate file " + files.certificate_file);
  if (context->use_private_key_file(files.key_file, net::ssl::context::pem, ec); ec)
    return failed("the key file " + files.key_file);
  if (::SSL_CTX_check_private_key(context->native_handle()) != 1)
    return make_status(errc::invalid_argument, "TLS: the key in " + files.key_file
                                                 + " is not the certificate's in "
                                                 + files.certificate_file);
  return context;
}

std::shared_ptr<net::ssl::context> http_server::impl::tls_for_next_connection() {
  if (!options.tls)
    return nullptr;
  auto now = steady::now();
  if (now - tls_checked_at < tls_check_interval)
    return tls_context;
  tls_checked_at = now;
  std::string stamp = files_stamp(*options.tls);
  if (stamp == tls_files_stamp)
    return tls_context;
  // Remembered even when it fails: a broken replacement is reported once, not
  // on every connection.
  tls_files_stamp = stamp;
  auto loaded = load_tls_context(*options.tls);
  if (!loaded) {
    log.warn("the TLS files changed but cannot be used; keeping the certificate in use",
             {{"error", loaded.error().message}});
    return tls_context;
  }
  tls_context = std::move(*loaded);
  tls_reloads.fetch_add(1);
  log.info("TLS certificate reloaded", {{"certificate", options.tls->certificate_file}});
  return tls_context;
}

status http_server::impl::start_tls() {
  if (!options.tls)
    return status::ok();
  tls_files_stamp = files_stamp(*options.tls);
  tls_checked_at = steady::now();
  auto loaded = load_tls_context(*options.tls);
  if (!loaded)
    return loaded.error();
  tls_context = std::move(*loaded);
  return status::ok();
}

} // namespace airlock::gateway
