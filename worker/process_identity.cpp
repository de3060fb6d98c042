// Process identity: users from an /etc/passwd, the fixed environment.

#include "worker/process_identity.hpp"

#include <charconv>
#include <vector>

#include "worker/egress_binding.hpp"

namespace airlock::worker {

std::optional<result<schema::process_user>> user_without_passwd(const std::string& user) {
  if (user.empty() || user == "root")
    return result<schema::process_user>(schema::process_user{false, 0, 0, "/root"});
  uint32_t uid = 0;
  auto [end, ec] = std::from_chars(user.data(), user.data() + user.size(), uid);
  if (ec == std::errc{} && end == user.data() + user.size())
    return result<schema::process_user>(schema::process_user{true, uid, uid, ""});
  if (user.find_first_of(":\n") != std::string::npos)
    return result<schema::process_user>(
      make_status(errc::invalid_argument, "user \"" + user + "\" is not a valid name"));
  return std::nullopt;
}

namespace {

/// One /etc/passwd line's (uid, gid, home) if it names `user`.
std::optional<schema::process_user> passwd_entry(std::string_view line, std::string_view user) {
  std::vector<std::string_view> fields;
  while (fields.size() < 7) {
    auto colon = line.find(':');
    fields.push_back(line.substr(0, colon));
    if (colon == std::string_view::npos)
      break;
    line.remove_prefix(colon + 1);
  }
  if (fields.size() < 6 || fields[0] != user)
    return std::nullopt;
  schema::process_user ids{true, 0, 0, std::string(fields[5])};
  auto parse = [](std::string_view text, uint32_t& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
  };
  if (!parse(fields[2], ids.uid) || !parse(fields[3], ids.gid))
    return std::nullopt;
  return ids;
}

} // namespace

result<schema::process_user> find_user(std::string_view passwd, const std::string& user) {
  while (!passwd.empty()) {
    auto newline = passwd.find('\n');
    auto line = passwd.substr(0, newline);
    if (auto ids = passwd_entry(line, user))
      return *ids;
    if (newline == std::string_view::npos)
      break;
    passwd.remove_prefix(newline + 1);
  }
  return make_status(errc::invalid_argument, "no user \"" + user
                                               + "\" in the sandbox's /etc/passwd; give a name it "
                                                 "lists or a numeric uid");
}

std::map<std::string, std::string> fixed_process_env(const std::string& path,
                                                     const schema::process_user& user) {
  std::map<std::string, std::string> env;
  env["PATH"] = path;
  // TLS clients that do not read the system bundle by default still trust
  // the egress proxy's CA.
  env["SSL_CERT_FILE"] = sandbox_ca_bundle;
  env["REQUESTS_CA_BUNDLE"] = sandbox_ca_bundle;
  env["NODE_EXTRA_CA_CERTS"] = sandbox_ca_file;
  if (!user.home.empty())
    env["HOME"] = user.home;
  return env;
}

std::string retried_each_second(const std::string& cmd, int attempts) {
  return "i=0; until ( " + cmd + " ); do i=$((i+1)); [ $i -ge " + std::to_string(attempts)
         + " ] && exit 1; sleep 1; done";
}

} // namespace airlock::worker
