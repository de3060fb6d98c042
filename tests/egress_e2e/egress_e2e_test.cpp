// Egress end to end: a real `airlockd serve` whose egress proxy resolves with a
// static name map and trusts the test upstream CA, sandboxes of the `base`
// template (python3, curl) running the red team's probes as root, and "the
// internet" in a network namespace (upstream_world.hpp). Every attack must
// fail and leave an audit record (GET /v1/audit); allowed traffic (HTTP,
// HTTPS with an injected credential, WebSocket) must work; the secret must
// appear nowhere in the sandbox nor in airlock's log.
//
// Every case runs once per runtime (TEST_P over {namespace, microvm}) against
// the same airlockd, started with the microvm runtime on where this host can
// boot the guest: a VM's traffic must meet exactly the rules, proxy and audit
// a namespace sandbox's does. The microvm instances skip with the reason
// where QEMU or the guest's build tools are missing.

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "tests/egress_e2e/egress_e2e_fixture.hpp"

namespace airlock::test {
namespace {

TEST_P(egress_e2e, allowed_http_and_https_reach_the_upstream_and_are_audited) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  auto http = run(id, "curl -s -m 10 http://api.test/echo");
  EXPECT_NE(http.find("\"server\":\"real\""), std::string::npos) << http;
  auto https = run(id, "curl -s -m 10 https://api.test/echo");
  EXPECT_NE(https.find("\"server\":\"real\""), std::string::npos)
    << "curl trusts the egress proxy's CA through the sandbox's bundle: " << https;
  auto record = audit_find(id, "egress", [](const json& r) {
    return r.value("decision", "") == "allowed" && r.value("target", "").find("api.test") == 0;
  });
  EXPECT_FALSE(record.is_null()) << "no audit record of the allowed request";
}

TEST_P(egress_e2e, a_direct_connection_to_an_ip_address_is_refused) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  auto out = run(id, "curl -s -m 10 -o /dev/null -w '%{http_code}' http://198.51.100.10/echo");
  EXPECT_EQ(out, "403") << out;
  EXPECT_FALSE(denied(id, "egress", "198.51.100.10").is_null());
}

TEST_P(egress_e2e, dns_spoofing_through_etc_hosts_or_a_fake_resolver_never_picks_the_destination) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  uint64_t attacker_before = world_->attacker_requests();
  // /etc/hosts sends api.test to the attacker: the egress proxy resolves itself.
  run(id, "echo '198.51.100.11 api.test' >> /etc/hosts");
  auto via_hosts = run(id, "curl -s -m 10 http://api.test/echo");
  EXPECT_NE(via_hosts.find("\"server\":\"real\""), std::string::npos) << via_hosts;
  // A fake resolver at the attacker's address: the query is redirected to
  // the egress proxy's resolver, which answers the true address.
  auto via_resolver = probe(id, "dns api.test 198.51.100.11");
  EXPECT_EQ(via_resolver, "rcode=0 answers=198.51.100.10\n");
  EXPECT_EQ(world_->attacker_requests(), attacker_before) << "the attacker was reached";
  EXPECT_EQ(world_->udp_datagrams(), 0U) << "a DNS query reached the fake resolver";
  // The spoofed name reached the attacker nowhere; the disallowed one is refused.
  auto evil = probe(id, "dns evil.test 198.51.100.11");
  EXPECT_EQ(evil.rfind("rcode=5", 0), 0U) << evil;
  EXPECT_FALSE(denied(id, "dns", "evil.test").is_null());
  auto record = audit_find(id, "egress", [](const json& r) {
    return r.value("decision", "") == "allowed" && r.value("target", "").find("api.test") == 0;
  });
  EXPECT_FALSE(record.is_null());
}

TEST_P(egress_e2e, sni_and_host_must_agree_and_be_allowed) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  // Allowed SNI, disallowed Host: the request is refused after termination.
  auto smuggled = probe(id, "tls api.test other.test /echo");
  EXPECT_EQ(smuggled.find("\"server\":\"real\""), std::string::npos) << smuggled;
  EXPECT_NE(smuggled.find(" 4"), std::string::npos) << "a 4xx status line: " << smuggled;
  EXPECT_FALSE(denied(id, "egress", "other.test").is_null());
  // Disallowed SNI, allowed Host: no certificate, no request.
  auto reverse = probe(id, "tls other.test api.test /echo");
  EXPECT_EQ(reverse.rfind("ERROR", 0), 0U) << reverse;
  EXPECT_FALSE(denied(id, "egress", "other.test").is_null());
}

TEST_P(egress_e2e, tls_without_sni_or_with_an_ip_address_as_sni_is_refused) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  auto no_sni = probe(id, "tls - api.test /echo");
  EXPECT_EQ(no_sni.rfind("ERROR", 0), 0U) << no_sni;
  EXPECT_FALSE(audit_find(id, "egress", [](const json& r) {
                 return r.value("decision", "") == "denied"
                        && r.value("reason", "").find("SNI") != std::string::npos;
               }).is_null());
  auto ip_sni = probe(id, "ipsni 198.51.100.10");
  EXPECT_EQ(ip_sni, "closed\n") << ip_sni;
  EXPECT_FALSE(denied(id, "egress", "198.51.100.10").is_null());
}

TEST_P(egress_e2e, proxy_requests_connect_and_absolute_uris_are_refused) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  auto connect = probe(id, "raw 198.51.100.10 80 'CONNECT other.test:443 HTTP/1.1\\r\\nHost: "
                           "api.test\\r\\n\\r\\n'");
  EXPECT_EQ(connect.rfind("HTTP/1.1 403", 0), 0U) << connect;
  auto absolute = probe(id, "raw 198.51.100.10 80 'GET http://other.test/echo HTTP/1.1\\r\\nHost: "
                            "api.test\\r\\n\\r\\n'");
  EXPECT_EQ(absolute.rfind("HTTP/1.1 403", 0), 0U) << absolute;
  EXPECT_FALSE(audit_find(id, "egress", [](const json& r) {
                 return r.value("decision", "") == "denied"
                        && r.value("detail", "").find("CONNECT") != std::string::npos;
               }).is_null());
}

TEST_P(egress_e2e, udp_quic_icmp_ipv6_and_spoofed_sources_never_leave) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(probe(id, "udp 198.51.100.11 443"), "sent\n");
  EXPECT_EQ(probe(id, "udp 198.51.100.11 9999"), "sent\n");
  EXPECT_EQ(probe(id, "ping 198.51.100.10"), "no reply\n");
  EXPECT_EQ(probe(id, "ipv6"), "sent\n");
  auto ipv6_socket = run(id, "curl -s -m 5 -6 http://[2001:db8::10]/ >/dev/null 2>&1; echo $?");
  EXPECT_NE(ipv6_socket, "0\n");
  EXPECT_FALSE(denied(id, "egress", "198.51.100.11:443", "UDP").is_null());
  EXPECT_FALSE(audit_find(id, "egress", [](const json& r) {
                 return r.value("decision", "") == "denied"
                        && r.value("reason", "").find("ICMP") != std::string::npos;
               }).is_null());
  EXPECT_FALSE(audit_find(id, "egress", [](const json& r) {
                 return r.value("decision", "") == "denied"
                        && r.value("reason", "").find("IPv6") != std::string::npos;
               }).is_null());
  EXPECT_EQ(world_->udp_datagrams(), 0U) << "UDP reached the internet";
}

TEST_P(egress_e2e, raw_packets_with_another_sandbox_or_the_host_as_source_are_dropped) {
  auto id = sandbox_with(allow_api);
  auto victim = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  ASSERT_FALSE(victim.empty());
  // The victim's address, as its own eth0 shows it.
  auto victim_address = line_of(probe(victim, "myaddr"));
  ASSERT_FALSE(victim_address.empty());
  EXPECT_EQ(probe(id, "spoof " + victim_address + " 198.51.100.11 spoofed-as-victim.api.test"),
            "sent\n");
  auto host_address = line_of(probe(id, "gateway"));
  EXPECT_EQ(probe(id, "spoof " + host_address + " 198.51.100.11 spoofed-as-host.api.test"),
            "sent\n");
  EXPECT_FALSE(denied(id, "egress", "", "spoof").is_null())
    << "the firewall's drop is audited against the sending sandbox's interface";
  // A genuine query from the sender is answered and audited: the resolver
  // works, so the spoofed ones were dropped before it.
  EXPECT_EQ(probe(id, "dns genuine.api.test").rfind("rcode=", 0), 0U);
  EXPECT_FALSE(audit_find(id, "dns", [](const json& r) {
                 return r.value("target", "").find("genuine.api.test") != std::string::npos;
               }).is_null());
  auto spoofed = admin().get("/v1/audit?kind=dns&limit=1000");
  EXPECT_EQ(spoofed.body.find("spoofed-as-"), std::string::npos)
    << "a spoofed query reached the resolver: " << spoofed.body;
}

TEST_P(egress_e2e, dns_refuses_txt_tunnelling_and_names_that_resolve_to_private_addresses) {
  auto id = sandbox_with(
    {{"profile", "allowlist"}, {"allow", {"api.test", "meta.test", "private.test", "loop.test"}}});
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(probe(id, "dns api.test 8.8.8.8 16").rfind("rcode=5", 0), 0U) << "TXT is refused";
  EXPECT_FALSE(denied(id, "dns", "api.test", "TXT").is_null());
  std::string label(60, 'a');
  auto tunnel = probe(id, "dns " + label + ".data." + label + ".evil.test");
  EXPECT_EQ(tunnel.rfind("rcode=5", 0), 0U) << tunnel;
  EXPECT_FALSE(denied(id, "dns", "evil.test").is_null());
  for (std::string name : {"meta.test", "private.test", "loop.test"}) {
    auto answer = probe(id, "dns " + name);
    EXPECT_EQ(answer.rfind("rcode=3", 0), 0U) << name << ": " << answer;
    // Past DNS (curl --resolve): the egress proxy resolves the name itself and
    // refuses the private answer (DNS rebinding).
    auto fetched = run(id, "curl -s -m 10 -o /dev/null -w '%{http_code}' --resolve " + name
                             + ":80:198.51.100.10 http://" + name + "/");
    EXPECT_TRUE(fetched == "403" || fetched == "502") << name << ": " << fetched;
    EXPECT_FALSE(denied(id, "egress", name).is_null()) << name;
  }
}

TEST_P(egress_e2e, other_ports_the_host_the_control_plane_and_other_sandboxes_are_unreachable) {
  auto id = sandbox_with({{"profile", "allowlist"}, {"allow", {"api.test:443"}}});
  auto other = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  ASSERT_FALSE(other.empty());
  auto port80 = run(id, "curl -s -m 10 -o /dev/null -w '%{http_code}' http://api.test:8080/echo");
  EXPECT_EQ(port80, "403") << port80;
  EXPECT_FALSE(denied(id, "egress", "api.test:8080").is_null());
  auto ssh = probe(id, "raw 198.51.100.10 22 'SSH-2.0-probe\\r\\n'");
  EXPECT_EQ(ssh, "closed\n") << ssh;
  EXPECT_FALSE(denied(id, "egress", "", "unsupported protocol").is_null());
  auto gateway = line_of(probe(id, "gateway"));
  auto control = run(id, "curl -s -m 5 -o /dev/null -w '%{http_code}' http://" + gateway + ":"
                           + std::to_string(server_->port()) + "/healthz");
  EXPECT_NE(control, "200") << "the control plane answered a sandbox";
  auto other_address = line_of(probe(other, "myaddr"));
  ASSERT_FALSE(other_address.empty());
  auto lateral =
    run(id, "curl -s -m 5 -o /dev/null -w '%{http_code}' http://" + other_address + ":8000/");
  EXPECT_NE(lateral, "200");
  EXPECT_FALSE(denied(id, "egress", other_address).is_null());
}

TEST_P(egress_e2e, a_credential_is_injected_rate_limited_and_never_enters_the_sandbox) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  auto client = admin();
  auto made =
    client.post("/v1/credentials",
                {{"name", "upstream-token"},
                 {"scope", {{"sandbox", id}}},
                 {"hosts", {"api.test"}},
                 {"inject", {{"header", "Authorization"}, {"value_template", "Bearer {secret}"}}},
                 {"secret", secret},
                 {"rate_limit_per_min", 3}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.body.find(secret), std::string::npos) << "the secret was echoed";
  auto echoed = run(id, "curl -s -m 10 https://api.test/echo");
  auto body = json::parse(echoed, nullptr, false);
  ASSERT_TRUE(body.is_object()) << echoed;
  // The upstream saw the header (as its hash); the sandbox saw no secret.
  unsigned char digest[32];
  (void)digest;
  EXPECT_FALSE(body.value("auth_sha256", "").empty()) << "no Authorization reached the upstream";
  EXPECT_EQ(echoed.find(secret), std::string::npos);
  // The guest's own Authorization header is replaced, not passed beside it.
  auto replaced = run(id, "curl -s -m 10 -H 'Authorization: Bearer guest' https://api.test/echo");
  EXPECT_EQ(json::parse(replaced, nullptr, false).value("auth_sha256", ""),
            body.value("auth_sha256", ""));
  // A third use within the minute is the limit; the fourth gets 429.
  run(id, "curl -s -m 10 -o /dev/null https://api.test/echo");
  auto limited = run(id, "curl -s -m 10 -o /dev/null -w '%{http_code}' https://api.test/echo");
  EXPECT_EQ(limited, "429");
  EXPECT_FALSE(audit_find(id, "credential", [](const json& r) {
                 return r.value("decision", "") == "allowed"
                        && r.value("detail", "").find("upstream-token") != std::string::npos;
               }).is_null());
  EXPECT_FALSE(audit_find(id, "credential", [](const json& r) {
                 return r.value("decision", "") == "denied";
               }).is_null());
  // Secrecy, checked from the host so that the search itself never carries
  // the secret into the sandbox: not in any file under airlockd's data
  // directory (the sandbox's root filesystem, the store, the worker's state),
  // not in the environment or memory of any process of the sandbox, not in
  // airlockd's log.
  EXPECT_EQ(files_containing(server_->data_dir(), secret), std::vector<std::string>{});
  auto pids = sandbox_pids(id);
  EXPECT_FALSE(pids.empty()) << "no process of the sandbox found in the host's /proc";
  for (int pid : pids) {
    EXPECT_FALSE(process_holds(pid, secret))
      << "the secret is in the memory or environment of "
         "sandbox process "
      << pid << " (" << read_file("/proc/" + std::to_string(pid) + "/comm") << ")";
  }
  EXPECT_EQ(server_->log().find(secret), std::string::npos) << "the secret is in airlockd's log";
}

TEST_P(egress_e2e, websocket_upgrades_work_through_tls_termination) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(probe(id, "ws api.test"), "HTTP/1.1 101 Switching Protocols | echo=True\n");
}

TEST_P(egress_e2e, a_websocket_tunnel_is_audited_as_one_with_its_protocol_and_judged_host) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(probe(id, "ws api.test"), "HTTP/1.1 101 Switching Protocols | echo=True\n");
  auto record =
    audit_find(id, "egress", [](const json& r) { return r.value("decision", "") == "tunnel"; });
  ASSERT_FALSE(record.is_null()) << "no egress/tunnel record for the WebSocket";
  EXPECT_EQ(record.value("target", ""), "api.test:443");
  EXPECT_NE(record.value("reason", "").find("websocket"), std::string::npos) << record.dump();
}

const json allow_wild = {{"profile", "allowlist"}, {"allow", {"allowed.test", "*.wild.test"}}};

// The bypass of a shared host: one request for an allowed name asks to
// switch to HTTP/2 (h2c); were the switch forwarded, the connection would
// become a tunnel whose next streams name any host the address serves.
TEST_P(egress_e2e, an_h2c_upgrade_to_an_allowed_name_cannot_reach_another_name_on_a_shared_host) {
  auto id = sandbox_with(allow_wild);
  ASSERT_FALSE(id.empty());
  auto out = probe(id, std::string("h2c ") + shared_host_address + " cdn.wild.test evil.test");
  EXPECT_EQ(out.find("content of evil.test"), std::string::npos)
    << "HTTP/2 after an h2c upgrade reached a name the policy refuses: " << out;
  // The switch is stripped: the request itself is answered over HTTP/1.1,
  // without the upgrade's headers, and the preface that follows is refused.
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0U) << out;
  EXPECT_NE(out.find("first=content of cdn.wild.test; headers=host "), std::string::npos) << out;
  EXPECT_NE(out.find("second=HTTP/1.1 505"), std::string::npos) << out;
  EXPECT_FALSE(denied(id, "egress", "cdn.wild.test:80", "h2c").is_null())
    << "the refused switch is audited as a denial";
  EXPECT_FALSE(denied(id, "egress", "", "HTTP/2").is_null()) << "the clear-text preface is audited";
  EXPECT_TRUE(
    audit_find(id, "egress", [](const json& r) { return r.value("decision", "") == "tunnel"; })
      .is_null())
    << "no tunnel was opened";
}

TEST_P(egress_e2e, a_switch_to_a_protocol_that_was_not_asked_for_is_cut_off) {
  auto id = sandbox_with(allow_wild);
  ASSERT_FALSE(id.empty());
  std::string host = std::string(shared_host_address) + " cdn.wild.test";
  EXPECT_EQ(probe(id, "switch " + host + " plain"), "HTTP/1.1 502 Bad Gateway | echoed=False\n");
  EXPECT_EQ(probe(id, "switch " + host + " ws"), "HTTP/1.1 502 Bad Gateway | echoed=False\n");
  EXPECT_FALSE(denied(id, "egress", "cdn.wild.test:80", "101").is_null());
}

TEST_P(egress_e2e, profiles_none_and_open_and_a_patch_apply_to_new_connections) {
  auto none = sandbox_with({{"profile", "none"}});
  ASSERT_FALSE(none.empty());
  EXPECT_EQ(run(none, "curl -s -m 10 -o /dev/null -w '%{http_code}' http://api.test/echo"), "000")
    << "none: the name does not even resolve";
  EXPECT_FALSE(denied(none, "dns", "api.test").is_null());
  auto open = sandbox_with({{"profile", "open"}});
  ASSERT_FALSE(open.empty());
  EXPECT_NE(run(open, "curl -s -m 10 http://other.test/echo").find("\"server\":\"real\""),
            std::string::npos);
  auto meta = run(open, "curl -s -m 10 -o /dev/null -w '%{http_code}' http://meta.test/");
  EXPECT_NE(meta, "200") << "open still refuses the metadata address";
  auto patched =
    admin().call("PATCH", "/v1/sandboxes/" + open, json{{"egress", {{"profile", "none"}}}}.dump());
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(patched.json["egress"].value("profile", ""), "none");
  auto after = run(open, "curl -s -m 10 -o /dev/null -w '%{http_code}' http://other.test/echo");
  EXPECT_NE(after, "200") << "the patch applies to new connections";
}

TEST_P(egress_e2e, the_templates_default_applies_when_a_create_names_no_egress) {
  auto id = sandbox_with(nullptr);
  ASSERT_FALSE(id.empty());
  auto record = admin().get("/v1/sandboxes/" + id).json;
  EXPECT_EQ(record["egress"].value("profile", ""), "allowlist") << record.dump();
  EXPECT_EQ(record["egress"]["allow"], json({"api.test"}));
  EXPECT_NE(run(id, "curl -s -m 10 http://api.test/echo").find("\"server\":\"real\""),
            std::string::npos);
  EXPECT_EQ(run(id, "curl -s -m 10 -o /dev/null -w '%{http_code}' --resolve other.test:80:"
                    "198.51.100.10 http://other.test/echo"),
            "403");
}

TEST_P(egress_e2e, the_egress_proxys_counters_are_on_metrics) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  run(id, "curl -s -m 10 -o /dev/null http://api.test/echo; curl -s -m 10 -o /dev/null "
          "--resolve other.test:80:198.51.100.10 http://other.test/");
  auto scraped = admin().get("/metrics");
  ASSERT_EQ(scraped.status, 200);
  auto value_of = [&scraped](const std::string& name) {
    auto at = scraped.body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(scraped.body.substr(at + name.size() + 2));
  };
  EXPECT_GE(value_of("airlock_egress_requests_total"), 1.0) << scraped.body;
  EXPECT_GE(value_of("airlock_egress_denied_total"), 1.0);
  EXPECT_GE(value_of("airlock_egress_dns_queries_total"), 2.0);
  EXPECT_GE(value_of("airlock_egress_active_connections"), 0.0);
  EXPECT_GE(value_of("airlock_egress_tunnels_total"), 0.0);
  EXPECT_GE(value_of("airlock_egress_switches_refused_total"), 0.0);
  EXPECT_NE(scraped.body.find("# TYPE airlock_egress_requests_total counter"), std::string::npos);
}

TEST_P(egress_e2e, lifecycle_changes_are_audited) {
  auto id = sandbox_with(allow_api);
  ASSERT_FALSE(id.empty());
  EXPECT_FALSE(audit_find(id, "lifecycle", [](const json& r) {
                 return r.value("target", "").find("sandbox.create") != std::string::npos;
               }).is_null());
}

INSTANTIATE_TEST_SUITE_P(runtimes, egress_e2e,
                         ::testing::Values(namespace_runtime, microvm_runtime),
                         [](const ::testing::TestParamInfo<std::string>& runtime) {
                           return runtime.param;
                         });

} // namespace
} // namespace airlock::test