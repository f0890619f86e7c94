#pragma once
// Runs the model-optimizer binary for the CLI tests and collects its exit code, stdout and stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace mo::test {

struct CliResult {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `args` follow the binary; `env` ("K=V K2=V2") is set for this run only.
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  static int n = 0;
  const std::string err_file =
      (std::filesystem::temp_directory_path() / ("mo_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(n++))).string();
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(MO_BINARY) + " " + args + " 2>" + err_file;
  CliResult r{};
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove(err_file);
  return r;
}

inline bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace mo::test
