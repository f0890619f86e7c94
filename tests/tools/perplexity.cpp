// Perplexity of a model on a text file, llama.cpp's method (mo::eval::perplexity_llama_cpp), for the
// quantization quality tables until `eval` exists.
//   mo_tool_perplexity MODEL TEXT_FILE [--ctx 512] [--chunks N] [--threads T]
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <string>

#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/engine.h"
#include "mo/eval/perplexity.h"
#include <fstream>
#include <sstream>
#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  try {
    if (argc < 3) {
      std::cerr << "usage: mo_tool_perplexity MODEL TEXT_FILE [--ctx 512] [--chunks N] [--threads T]\n";
      return 2;
    }
    int ctx = 512, chunks = 0, threads = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--ctx")
        ctx = std::stoi(argv[i + 1]);
      else if (a == "--chunks")
        chunks = std::stoi(argv[i + 1]);
      else if (a == "--threads")
        threads = std::stoi(argv[i + 1]);
    }
    if (threads > 0) mo::set_default_threads(threads);
    const auto t0 = std::chrono::steady_clock::now();
    auto files = mo::model::ModelFiles::open(argv[1]);
    auto tok = files.gguf() ? mo::tok::load_tokenizer_gguf(*files.gguf()) : mo::tok::load_tokenizer_json(files.tokenizer_path());
    mo::engine::Engine engine(mo::engine::bind_weights(files), mo::default_pool());
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) throw mo::UsageError(fmt::format("{}: cannot open", argv[2]));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (!text.empty() && text.back() == '\n') text.pop_back();
    auto r = mo::eval::perplexity_llama_cpp(engine, *tok, text, ctx, chunks);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << fmt::format("{{\"ppl\": {:.4f}, \"nll\": {:.6f}, \"windows\": {}, \"tokens_scored\": {}, \"seconds\": {:.1f}}}\n", r.ppl,
                             r.nll_mean, r.windows, r.tokens_scored, s);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
