// GGUF block encoding with mo::quant::gguf_quantize_row, for tests/python/test_gguf_quantize_reference.py.
//   mo_tool_gguf_quantize TYPE N_PER_ROW IN.f32 OUT.bin [IMPORTANCE.f32]
// IN holds rows of N_PER_ROW little-endian f32; each row is quantized on its own into TYPE (name or
// id) and the blocks are written one row after another. IMPORTANCE, when given, holds N_PER_ROW f32
// weights used for every row (an importance-matrix row, as llama-quantize passes it).
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"
#include "mo/quant/gguf_quantize.h"

namespace {

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw mo::UsageError(path + ": cannot open");
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.size() % sizeof(float) != 0) throw mo::UsageError(path + ": not a whole number of f32");
  std::vector<float> v(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(v.data()));
  return v;
}

std::uint32_t ggml_type(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return std::stoul(s);
  const auto id = mo::ggml_type_from_name(s);
  if (!id) throw mo::UsageError("unknown ggml type '" + s + "'");
  return *id;
}

int run(const std::vector<std::string>& args) {
  if (args.size() != 4 && args.size() != 5) {
    std::cerr << "usage: mo_tool_gguf_quantize TYPE N_PER_ROW IN.f32 OUT.bin [IMPORTANCE.f32]\n";
    return mo::kExitUsage;
  }
  const std::uint32_t type = ggml_type(args[0]);
  const std::int64_t n_per_row = std::stoll(args[1]);
  const std::vector<float> src = read_floats(args[2]);
  if (n_per_row <= 0 || src.size() % static_cast<std::size_t>(n_per_row) != 0) {
    throw mo::UsageError(args[2] + ": not a whole number of rows of " + args[1]);
  }
  std::vector<float> importance;
  if (args.size() == 5) {
    importance = read_floats(args[4]);
    if (importance.size() != static_cast<std::size_t>(n_per_row)) {
      throw mo::UsageError(args[4] + ": expected " + args[1] + " importance values");
    }
  }
  const std::int64_t rows = static_cast<std::int64_t>(src.size()) / n_per_row;
  const std::uint64_t row_bytes = mo::ggml_row_bytes(type, static_cast<std::uint64_t>(n_per_row));
  std::vector<char> out(static_cast<std::size_t>(row_bytes * static_cast<std::uint64_t>(rows)));
  for (std::int64_t r = 0; r < rows; ++r) {
    mo::quant::gguf_quantize_row(type, src.data() + r * n_per_row, out.data() + r * row_bytes, n_per_row,
                                 importance.empty() ? nullptr : importance.data());
  }
  std::ofstream o(args[3], std::ios::binary);
  o.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!o) throw mo::Error(args[3] + ": cannot write");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const mo::UsageError& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitRuntime;
  }
}
