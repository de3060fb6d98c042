// `airlock template`: build, push, list, inspect and remove templates and
// set their warm pools.
#include <charconv>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace airlock::cli {

using nlohmann::json;

namespace {

/// The POST /v1/templates body of `template build NAME` from its flags.
result<json> recipe_body(context& ctx, const std::string& name) {
  const auto& inv = ctx.inv;
  auto all = [&inv](std::string_view flag) {
    auto found = inv.flags.find(flag);
    return found == inv.flags.end() ? std::vector<std::string>{} : found->second;
  };
  json body = {{"name", name}};
  if (inv.has("from") == inv.has("debootstrap"))
    return make_status(errc::invalid_argument,
                       "template build needs one of --from TEMPLATE or --debootstrap SUITE");
  if (auto from = inv.value("from"))
    body["from"] = {{"template", *from}};
  else
    body["from"] = {
      {"debootstrap", {{"suite", *inv.value("debootstrap")}, {"packages", all("package")}}}};
  if (inv.has("package") && inv.has("from"))
    return make_status(errc::invalid_argument, "--package goes with --debootstrap");
  body["run"] = all("run");
  if (inv.has("env"))
    body["env"] = inv.pairs("env");
  for (const auto& [flag, field] :
       {std::pair{"workdir", "workdir"}, std::pair{"user", "user"},
        std::pair{"start-cmd", "start_cmd"}, std::pair{"ready-cmd", "ready_cmd"}})
    if (auto value = inv.value(flag))
      body[field] = *value;
  if (auto egress = inv.value("egress"))
    body["egress"] = {{"profile", *egress}, {"allow", all("allow")}};
  else if (inv.has("allow"))
    return make_status(errc::invalid_argument, "--allow goes with --egress allowlist");
  return body;
}

} // namespace

/// `template ls | get NAME | build NAME ... | push NAME FILE --format F | log NAME VERSION |
/// rm NAME | pool NAME [SIZE]`.
int run_template(context& ctx) {
  const auto& args = ctx.inv.positionals;
  const std::string& verb = args[0];
  auto needs = [&ctx, &args, &verb](size_t count, const char* usage) {
    if (args.size() == count)
      return 0;
    ctx.io.err << "airlock: usage: airlock template " << verb << usage << "\n";
    return exit_usage;
  };
  if (verb == "ls") {
    if (int bad = needs(1, ""); bad != 0)
      return bad;
    return print_listing(ctx, "/v1/templates", {},
                         {{"NAME", "name"},
                          {"VERSION", "version"},
                          {"STATE", "state"},
                          {"SIZE", "size_bytes"},
                          {"UPDATED", "updated_at"}});
  }
  if (verb == "get") {
    if (int bad = needs(2, " NAME"); bad != 0)
      return bad;
    auto answer = ctx.api.call("GET", "/v1/templates/" + path_id(args[1]));
    if (!answer)
      return report(ctx, answer.error());
    ctx.io.out << answer->dump(2) << "\n";
    return 0;
  }
  if (verb == "rm") {
    if (int bad = needs(2, " NAME [--version N]"); bad != 0)
      return bad;
    query_params query;
    if (auto version = ctx.inv.number("version"))
      query.emplace_back("version", std::to_string(*version));
    return run_operation(ctx, "DELETE", with_query("/v1/templates/" + path_id(args[1]), query));
  }
  if (verb == "push") {
    if (int bad = needs(3, " NAME FILE --format oci|docker|tar"); bad != 0)
      return bad;
    auto format = ctx.inv.value("format");
    if (!format) {
      ctx.io.err << "airlock: template push needs --format oci, docker or tar\n";
      return exit_usage;
    }
    query_params query{{"format", *format}};
    if (auto start = ctx.inv.value("start-cmd"))
      query.emplace_back("start_cmd", *start);
    auto answer = put_local_file(
      ctx, with_query("/v1/templates/" + path_id(args[1]) + "/archive", query), args[2]);
    if (!answer)
      return report(ctx, answer.error());
    return follow_operation(ctx, *answer, "version");
  }
  if (verb == "build") {
    if (int bad = needs(2, " NAME --from T[:N] | --debootstrap SUITE [--run CMD]..."); bad != 0)
      return bad;
    auto body = recipe_body(ctx, args[1]);
    if (!body) {
      ctx.io.err << "airlock: " << body.error().message << "\n";
      return exit_usage;
    }
    return run_operation(ctx, "POST", "/v1/templates", &*body, "version");
  }
  if (verb == "log") {
    if (int bad = needs(3, " NAME VERSION"); bad != 0)
      return bad;
    auto log = ctx.api.send({"GET",
                             ctx.api.absolute("/v1/templates/" + path_id(args[1]) + "/versions/"
                                              + path_id(args[2]) + "/log"),
                             {},
                             {}});
    if (!log)
      return report(ctx, log.error());
    if (log->status != 200)
      return report(ctx, api_failure(log->status, log->body));
    ctx.io.out << log->body;
    return 0;
  }
  if (verb == "pool") {
    if (args.size() != 2 && args.size() != 3) {
      ctx.io.err << "airlock: usage: airlock template pool NAME [SIZE] [--cpu M] [--memory MB] "
                    "[--disk MB]\n";
      return exit_usage;
    }
    const std::string path = "/v1/templates/" + path_id(args[1]) + "/pool";
    result<nlohmann::json> answer = make_status(errc::internal, "no answer");
    if (args.size() == 2) {
      answer = ctx.api.call("GET", path);
    } else {
      uint64_t size = 0;
      auto [end, ec] = std::from_chars(args[2].data(), args[2].data() + args[2].size(), size);
      if (ec != std::errc{} || end != args[2].data() + args[2].size()) {
        ctx.io.err << "airlock: the pool SIZE is a number of sandboxes per worker\n";
        return exit_usage;
      }
      nlohmann::json body = {{"size", size}};
      for (const auto& [flag, field] :
           {std::pair{"cpu", "cpu_millis"}, std::pair{"memory", "memory_mb"},
            std::pair{"disk", "disk_mb"}})
        if (auto value = ctx.inv.number(flag))
          body[field] = *value;
      answer = ctx.api.call("PUT", path, &body);
    }
    if (!answer)
      return report(ctx, answer.error());
    if (ctx.inv.json) {
      ctx.io.out << answer->dump(2) << "\n";
      return 0;
    }
    ctx.io.out << "size " << answer->value("size", 0) << " ready " << answer->value("ready", 0)
               << " creating " << answer->value("creating", 0) << " hits "
               << answer->value("hits_total", 0) << " misses " << answer->value("misses_total", 0)
               << "\n";
    return 0;
  }
  ctx.io.err << "airlock: template takes ls, get, build, push, log, rm or pool, not '" << verb
             << "'\n";
  return exit_usage;
}

} // namespace airlock::cli
