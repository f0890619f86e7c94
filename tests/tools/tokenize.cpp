// Prints what our tokenizers compute, for the Python tests that compare them with reference packages,
// and measures encoding throughput.
//
//   mo_tool_tokenize TOKENIZER encode [--no-special] [--parse-special] [--json] < text
//       one line of space-separated ids per input line (--json: each input line is a JSON string)
//   mo_tool_tokenize TOKENIZER decode [--keep-special] [--json] < ids
//       one line of text per line of ids (--json: printed as a JSON string)
//   mo_tool_tokenize TOKENIZER info
//   mo_tool_tokenize --bench FILE TOKENIZER...
//       MB/s for encoding all of FILE (CRLF normalised to LF) as one text, per tokenizer
//
// TOKENIZER is a tokenizer.json, a directory holding one, or a .gguf file.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"

namespace {

using mo::tok::Tokenizer;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Tokenizer> load(const std::string& path) {
  if (ends_with(path, ".gguf")) return mo::tok::load_tokenizer_gguf(mo::gguf::read_metadata(path));
  return mo::tok::load_tokenizer_json(path);
}

// Lines of stdin without their '\n'; a last line without one still counts.
std::vector<std::string> read_lines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw mo::UsageError(path + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int encode(const Tokenizer& tok, bool add_special, bool parse_special, bool json) {
  std::string out;
  for (const std::string& line : read_lines(std::cin)) {
    const std::string text = json ? nlohmann::json::parse(line).get<std::string>() : line;
    const auto ids = tok.encode(text, add_special, parse_special);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int decode(const Tokenizer& tok, bool skip_special, bool json) {
  for (const std::string& line : read_lines(std::cin)) {
    std::vector<std::int32_t> ids;
    std::istringstream in(line);
    for (long long id; in >> id;) ids.push_back(static_cast<std::int32_t>(id));
    const std::string text = tok.decode(ids, skip_special);
    const std::string shown = json ? nlohmann::json(text).dump() : text;
    std::fwrite(shown.data(), 1, shown.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

int info(const Tokenizer& tok) {
  const auto& s = tok.special();
  const auto id = [](const std::optional<std::int32_t>& v) { return v ? std::to_string(*v) : std::string("none"); };
  fmt::print("kind {}\npre {}\nvocab_size {}\nbos {}\neos {}\nunk {}\npad {}\nadd_bos {}\nadd_eos {}\n", tok.kind(), tok.pre(),
             tok.vocab_size(), id(s.bos), id(s.eos), id(s.unk), id(s.pad), s.add_bos, s.add_eos);
  return 0;
}

// Seconds of CPU this thread has used: on a busy machine wall time says more about the neighbours.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int bench(const std::string& file, const std::vector<std::string>& tokenizers) {
  std::string text = read_file(file);
  std::string lf;
  lf.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i)
    if (!(text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) lf += text[i];
  text.swap(lf);
  using clock = std::chrono::steady_clock;
  fmt::print("{}: {} bytes\n", file, text.size());
  for (const std::string& path : tokenizers) {
    const auto t0 = clock::now();
    const auto tok = load(path);
    const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
    // The first pass fills the word cache; report it and the best of the warm passes, by CPU time and
    // by wall time.
    double first_cpu = 0, best_cpu = 1e30, best_wall = 1e30;
    std::size_t n_tokens = 0;
    for (int pass = 0; pass < 4; ++pass) {
      const auto a = clock::now();
      const double c = thread_cpu_seconds();
      n_tokens = tok->encode(text, false, false).size();
      const double cpu = thread_cpu_seconds() - c;
      const double wall = std::chrono::duration<double>(clock::now() - a).count();
      if (pass == 0) {
        first_cpu = cpu;
      } else {
        best_cpu = std::min(best_cpu, cpu);
        best_wall = std::min(best_wall, wall);
      }
    }
    const double mb = static_cast<double>(text.size()) / 1e6;
    fmt::print("{} ({} {}): load {:.2f} s, {} tokens, cold {:.1f} MB/s, warm {:.1f} MB/s (CPU time; wall {:.1f} MB/s)\n", path, tok->kind(),
               tok->pre(), load_s, n_tokens, mb / first_cpu, mb / best_cpu, mb / best_wall);
  }
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: mo_tool_tokenize TOKENIZER encode [--no-special] [--parse-special] [--json]\n"
               "       mo_tool_tokenize TOKENIZER decode [--keep-special] [--json]\n"
               "       mo_tool_tokenize TOKENIZER info\n"
               "       mo_tool_tokenize --bench FILE TOKENIZER...\n");
  return mo::kExitUsage;
}

int run(const std::vector<std::string>& args) {
  if (args.size() >= 3 && args[0] == "--bench") return bench(args[1], {args.begin() + 2, args.end()});
  if (args.size() < 2) return usage();
  bool add_special = true, parse_special = false, skip_special = true, json = false;
  for (std::size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--no-special")
      add_special = false;
    else if (args[i] == "--parse-special")
      parse_special = true;
    else if (args[i] == "--keep-special")
      skip_special = false;
    else if (args[i] == "--json")
      json = true;
    else
      return usage();
  }
  const auto tok = load(args[0]);
  if (args[1] == "encode") return encode(*tok, add_special, parse_special, json);
  if (args[1] == "decode") return decode(*tok, skip_special, json);
  if (args[1] == "info") return info(*tok);
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run({argv + 1, argv + argc});
  } catch (const mo::UsageError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return mo::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return mo::kExitRuntime;
  }
}
