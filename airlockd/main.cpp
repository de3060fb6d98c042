// airlockd: parses the command line and hands over to one subcommand.
// Exit status: 0 success, 1 could not start or failed, 2 bad usage.

#include <csignal>
#include <exception>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/log.hpp"
#include "airlockd/commands.hpp"
#include "airlockd/options.hpp"
#include "airlockd/version.hpp"

namespace {

namespace al = airlock::airlockd;

constexpr int exit_usage = 2;

/// Parses a subcommand's options, answers --help, or sets up logging and runs it.
template <class Parse, class Run>
int run_command(std::string_view command, std::span<const std::string> args,
                const al::process_env& env, Parse parse, Run run) {
  auto parsed = parse(args, env);
  if (!parsed) {
    std::cerr << "airlockd " << command << ": " << parsed.error().message << "\n\n"
              << al::command_usage(command);
    return exit_usage;
  }
  if (parsed->help) {
    std::cout << al::command_usage(command);
    return 0;
  }
  airlock::actors::log_sink sink(std::cerr);
  airlock::actors::logger log("airlockd", parsed->options.log_level, sink);
  if (!parsed->config_file.empty())
    log.info("read the config file", {{"path", parsed->config_file}});
  return run(parsed->options, log);
}

int run(int argc, char** argv) {
  // First, before anything starts a thread: see stop_signals.
  al::stop_signals signals;
  // A closed stdout or socket must be an error to handle, not a silent death.
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << al::general_usage();
    return exit_usage;
  }
  std::string_view command = args[0];
  std::span<const std::string> rest = std::span<const std::string>(args).subspan(1);
  al::process_env env = al::current_process_env();

  if (command == "serve") {
    return run_command(
      command, rest, env, al::parse_serve,
      [&signals](const al::serve_options& options, const airlock::actors::logger& log) {
        return al::run_serve(options, signals, std::cout, log);
      });
  }
  if (command == "control") {
    return run_command(
      command, rest, env, al::parse_control,
      [&signals](const al::control_options& options, const airlock::actors::logger& log) {
        return al::run_control(options, signals, std::cout, log);
      });
  }
  if (command == "worker" && !rest.empty() && rest[0] == "remove")
    return al::run_worker_remove(rest.subspan(1), env, std::cout, std::cerr);
  if (command == "worker") {
    return run_command(
      command, rest, env, al::parse_worker,
      [&signals](const al::worker_options& options, const airlock::actors::logger& log) {
        return al::run_worker(options, signals, std::cout, log);
      });
  }
  if (command == "token")
    return al::run_token(rest, env, std::cout, std::cerr);
  if (command == "version" || command == "--version") {
    std::cout << al::version_line() << std::endl;
    return 0;
  }
  if (command == "help" || command == "-h" || command == "--help") {
    std::cout << al::general_usage();
    return 0;
  }
  std::cerr << "airlockd: unknown command '" << command << "'\n\n" << al::general_usage();
  return exit_usage;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    // Failures are values below main; an exception here is a bug or memory
    // exhaustion, and the operator should see which.
    std::cerr << "airlockd: fatal: " << e.what() << "\n";
    return 1;
  }
}
