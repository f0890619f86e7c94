// A plain main for compilers without libFuzzer (g++): runs each file given, or each file of each folder
// given, through LLVMFuzzerTestOneInput once — the seed corpora replayed as a test.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) runs += run_file(e.path());
    } else if (std::filesystem::is_regular_file(p)) {
      runs += run_file(p);
    } else {
      std::fprintf(stderr, "fuzz: %s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::printf("fuzz: %d inputs ran without a crash\n", runs);
  return 0;
}
