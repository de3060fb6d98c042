#include "bench/egress/pki.hpp"

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "bench/egress/tls_io.hpp"

namespace airlock::egress_bench {

namespace {

result<crypto::key_and_cert> make_intermediate(const crypto::key_and_cert& root,
                                               std::string_view name) {
  auto key = crypto::generate_key_pem();
  if (!key)
    return key.error();
  auto public_key = crypto::public_key_pem(*key);
  if (!public_key)
    return public_key.error();
  auto cert = crypto::issue_intermediate(root, *public_key, name, 2);
  if (!cert)
    return cert.error();
  return crypto::key_and_cert{*key, *cert + root.cert_pem};
}

} // namespace

result<bench_pki> make_pki() {
  bench_pki pki;
  auto root = crypto::create_root_ca("airlock egress_bench root", 2);
  if (!root)
    return root.error();
  pki.root = *root;
  auto upstream_ca = make_intermediate(pki.root, "egress_bench upstream CA");
  if (!upstream_ca)
    return upstream_ca.error();
  auto minter = crypto::leaf_minter::create(upstream_ca->key_pem, upstream_ca->cert_pem);
  if (!minter)
    return minter.error();
  auto leaf = (*minter)->for_name(bench_host);
  if (!leaf)
    return leaf.error();
  pki.upstream_leaf = *leaf;
  auto proxy_ca = make_intermediate(pki.root, "egress_bench proxy CA");
  if (!proxy_ca)
    return proxy_ca.error();
  pki.proxy_key_pem = proxy_ca->key_pem;
  pki.proxy_chain_pem = proxy_ca->cert_pem;
  return pki;
}

result<ssl_ctx_ptr> server_context(const crypto::leaf_minter::leaf& leaf) {
  ssl_ctx_ptr ctx{SSL_CTX_new(TLS_server_method())};
  if (!ctx)
    return make_status(errc::internal, openssl_error("SSL_CTX_new"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (SSL_CTX_use_certificate(ctx.get(), leaf.cert.get()) != 1
      || SSL_CTX_use_PrivateKey(ctx.get(), leaf.key.get()) != 1)
    return make_status(errc::internal, openssl_error("upstream certificate"));
  for (const auto& cert : leaf.chain)
    SSL_CTX_add1_chain_cert(ctx.get(), cert.get());
  return ctx;
}

result<ssl_ctx_ptr> client_context(const std::string& root_pem) {
  ssl_ctx_ptr ctx{SSL_CTX_new(TLS_client_method())};
  if (!ctx)
    return make_status(errc::internal, openssl_error("SSL_CTX_new"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio{
    BIO_new_mem_buf(root_pem.data(), static_cast<int>(root_pem.size())), &BIO_free};
  std::unique_ptr<X509, decltype(&X509_free)> root{
    PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free};
  if (!root || X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), root.get()) != 1)
    return make_status(errc::internal, openssl_error("client trust store"));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return ctx;
}

} // namespace airlock::egress_bench
