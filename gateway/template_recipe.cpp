// The recipe of POST /v1/templates (docs/templates.md): the body checked
// into what the worker builds (from, run, ready_cmd, start_cmd, egress) and
// the version's defaults (env, egress, default runtime).

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "actors/runtime_choice.hpp"
#include "actors/template_records.hpp"
#include "gateway/control_api_internal.hpp"

namespace airlock::gateway::control_detail {

namespace {

using nlohmann::json;

/// Whether `word` may name a Debian package or suite: [a-z0-9][a-z0-9+.-]*.
bool is_debian_word(const std::string& word) {
  if (word.empty() || word.size() > 128
      || !(std::islower(static_cast<unsigned char>(word[0]))
           || std::isdigit(static_cast<unsigned char>(word[0]))))
    return false;
  return std::all_of(word.begin(), word.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c))
           || std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '.' || c == '-';
  });
}

} // namespace

result<template_recipe> parse_recipe(const json& body, const api_options& options) {
  template_recipe recipe;
  auto bad = [](const std::string& message) {
    return make_status(errc::invalid_argument, message);
  };
  auto name = body.find("name");
  if (name == body.end() || !name->is_string()
      || !actors::is_valid_template_name(name->get<std::string>()))
    return bad("name must be 1 to 63 of [a-z0-9-] starting with a letter or digit");
  recipe.name = name->get<std::string>();
  auto from = body.find("from");
  if (from == body.end() || !from->is_object() || from->size() != 1)
    return bad("from must be {\"template\": \"NAME[:VERSION]\"} or {\"debootstrap\": "
               "{\"suite\": \"bookworm\", \"packages\": [...]}}");
  if (auto base = from->find("template"); base != from->end()) {
    if (!base->is_string() || !actors::parse_template_ref(base->get<std::string>()))
      return bad("from.template must name a template: NAME or NAME:VERSION");
    recipe.base = base->get<std::string>();
  } else if (auto boot = from->find("debootstrap"); boot != from->end() && boot->is_object()) {
    std::string suite = boot->value("suite", std::string("bookworm"));
    if (!is_debian_word(suite))
      return bad("from.debootstrap.suite must name a Debian suite, e.g. bookworm");
    json packages = json::array();
    if (auto listed = boot->find("packages"); listed != boot->end()) {
      if (!listed->is_array() || listed->size() > options.template_packages_max)
        return bad("from.debootstrap.packages must be a list of at most "
                   + std::to_string(options.template_packages_max) + " package names");
      for (const auto& package : *listed) {
        if (!package.is_string() || !is_debian_word(package.get<std::string>()))
          return bad("from.debootstrap.packages holds " + package.dump()
                     + ", which is not a Debian package name");
        packages.push_back(package);
      }
    }
    recipe.from = {{"debootstrap", {{"suite", suite}, {"packages", packages}}}};
  } else {
    return bad("from must hold \"template\" or \"debootstrap\"");
  }
  if (auto run = body.find("run"); run != body.end()) {
    if (!run->is_array() || run->size() > options.template_run_steps_max)
      return bad("run must be a list of at most " + std::to_string(options.template_run_steps_max)
                 + " shell lines");
    for (const auto& line : *run) {
      if (!line.is_string() || line.get_ref<const std::string&>().empty()
          || line.get_ref<const std::string&>().size() > options.template_step_bytes_max)
        return bad("each run step must be a shell line of 1 to "
                   + std::to_string(options.template_step_bytes_max) + " bytes");
      recipe.run.push_back(line);
    }
  }
  for (auto [field, out] :
       {std::pair{"ready_cmd", &recipe.ready_cmd}, std::pair{"workdir", &recipe.workdir},
        std::pair{"user", &recipe.user}, std::pair{"start_cmd", &recipe.start_cmd}}) {
    auto text = read_text(body, field, options.limits);
    if (!text)
      return text.error();
    *out = text->value_or("");
  }
  recipe.has_start_cmd = body.contains("start_cmd") && !body["start_cmd"].is_null();
  if (auto runtime = body.find("default_runtime"); runtime != body.end() && !runtime->is_null()) {
    if (!runtime->is_string() || !actors::is_runtime_name(runtime->get<std::string>()))
      return bad("default_runtime must be \"namespace\" or \"microvm\"");
    recipe.default_runtime = runtime->get<std::string>();
  }
  // env and egress go through a create's own checks.
  json checked = {{"template", recipe.name}};
  for (const char* field : {"env", "egress"})
    if (body.contains(field))
      checked[field] = body[field];
  auto spec = parse_sandbox_spec(checked, options.limits);
  if (!spec)
    return spec.error();
  recipe.defaults = std::move(*spec);
  return recipe;
}

} // namespace airlock::gateway::control_detail
