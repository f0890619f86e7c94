// A task file for eval --tasks (JSONL: query/choices/gold, context_options/continuation/gold, or
// context/continuation), read as the evaluation reads it.
#include "fuzz_util.h"
#include "mo/eval/tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = mo::fuzz::write_input(data, size, "task.jsonl");
  mo::fuzz::refusals_are_errors([&] {
    const mo::eval::TaskFile t = mo::eval::load_task_file(path);
    for (const auto& item : t.items) {
      // What scoring relies on: one context and one continuation per choice, the gold index among them.
      if (item.contexts.size() != item.continuations.size() || item.contexts.empty()) std::abort();
      if (!item.completion && (item.gold < 0 || static_cast<std::size_t>(item.gold) >= item.choices.size())) std::abort();
    }
  });
  return 0;
}
