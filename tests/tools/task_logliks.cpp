// Per-item log-likelihoods of a task file as `model-optimizer eval --tasks` scores them, one JSON line per
// item ({"item", "logliks", "gold"}), for comparing with lm-evaluation-harness's logged samples or with
// what `serve` answers to the same requests.
//   mo_tool_task_logliks MODEL TASK_FILE [--limit N] [--threads T]
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "mo/core/thread_pool.h"
#include "mo/engine/engine.h"
#include "mo/eval/tasks.h"
#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  try {
    if (argc < 3) {
      std::cerr << "usage: mo_tool_task_logliks MODEL TASK_FILE [--limit N] [--threads T]\n";
      return 2;
    }
    std::int64_t limit = 0;
    int threads = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--limit") limit = std::stoll(argv[i + 1]);
      if (a == "--threads") threads = std::stoi(argv[i + 1]);
    }
    if (threads > 0) mo::set_default_threads(threads);
    auto files = mo::model::ModelFiles::open(argv[1]);
    auto tok = files.gguf() ? mo::tok::load_tokenizer_gguf(*files.gguf()) : mo::tok::load_tokenizer_json(files.tokenizer_path());
    mo::engine::Engine engine(mo::engine::bind_weights(files), mo::default_pool());
    const mo::eval::TaskFile task = mo::eval::load_task_file(argv[2]);
    const mo::eval::TaskResult r = mo::eval::run_task(engine, *tok, task, limit);
    for (std::size_t i = 0; i < r.item_logliks.size(); ++i)
      std::cout << nlohmann::json{{"item", i}, {"logliks", r.item_logliks[i]}, {"gold", task.items[i].gold}}.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
