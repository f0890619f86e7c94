#pragma once
// llama.cpp's tokenizer test vectors (tests/test-tokenizer-0.cpp's read_tests): X.gguf.inp holds the
// inputs separated by "\n__ggml_vocab_test__\n", X.gguf.out one line of space-separated ids per input.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace mo::test {

struct VocabVector {
  std::string input;
  std::vector<std::int32_t> expected;
};

// `gguf_path` is the vocab file; its .inp and .out sit beside it.
inline std::vector<VocabVector> read_vocab_vectors(const std::string& gguf_path) {
  std::ifstream in(gguf_path + ".inp", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (std::size_t pos = 0; pos < raw.size();) {
    const std::size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(gguf_path + ".out");
  std::vector<VocabVector> vectors;
  std::string line;
  for (const auto& input : inputs) {
    if (!std::getline(out, line)) break;
    VocabVector v{input, {}};
    std::istringstream ids(line);
    for (std::int32_t id; ids >> id;) v.expected.push_back(id);
    vectors.push_back(std::move(v));
  }
  EXPECT_EQ(vectors.size(), inputs.size()) << gguf_path << ": .inp and .out hold different numbers of tests";
  return vectors;
}

}  // namespace mo::test
