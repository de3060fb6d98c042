// The airlock command: wires the process's arguments, environment and
// standard streams into run_cli (cli/cli.hpp), where everything happens.

#include <unistd.h>

#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

extern char** environ; // NOLINT: the process environment, read once here

int main(int argc, char** argv) {
  // A closed pipe (airlock cp ID:/f - | head) must end the write, not the process.
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  airlock::cli::env_map env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    auto eq = text.find('=');
    if (eq != std::string::npos)
      env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  airlock::cli::cli_io io{std::cin,
                          std::cout,
                          std::cerr,
                          STDIN_FILENO,
                          ::isatty(STDIN_FILENO) ? STDIN_FILENO : -1,
                          ::isatty(STDERR_FILENO) == 1};
  try {
    return airlock::cli::run_cli(args, env, io);
  } catch (const std::exception& e) {
    std::cerr << "airlock: internal error: " << e.what() << "\n";
    return 1;
  }
}
