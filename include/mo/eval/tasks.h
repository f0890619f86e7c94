#pragma once
// Multiple-choice and completion tasks from JSONL files in llm-foundry's local-data format, scored by the
// log-likelihood of each continuation after its context (one forward pass per item: the shared prefix
// once, every choice as a fork of it in the paged KV cache):
//  - {"query", "choices", "gold"}: context = query, continuations = " " + choice (ARC, PIQA, COPA, BoolQ);
//  - {"context_options", "continuation", "gold"}: one context per option, the same " " + continuation
//    (Winogrande; the options differ in the context);
//  - {"context", "continuation"}: no choices; acc = the greedy continuation equals it (LAMBADA), and the
//    mean log-likelihood of the continuation is reported.
// acc, acc_norm and acc_bytes as lm-evaluation-harness 0.4.13 computes them (pick_choice below).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mo/engine/engine.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::eval {

struct TaskItem {
  std::vector<std::string> contexts;       // one per choice (repeated for query/choices items)
  std::vector<std::string> continuations;  // one per choice
  std::vector<std::string> choices;        // what lm-eval's doc_to_choice gives: the choice, or the context option
  int gold = 0;                            // index of the right choice
  bool completion = false;                 // a context/continuation item (one "choice", greedy match)
};

struct TaskFile {
  std::string name;  // file stem: "arc_easy"
  std::string path;
  std::vector<TaskItem> items;
};

// Reads a task file. Throws UsageError "<path>:<line>: <what>" for a line that is not JSON, lacks a field,
// has an empty choice list or a gold index out of range.
TaskFile load_task_file(const std::string& path);

struct TaskResult {
  std::string name, path;
  bool completion = false;
  std::int64_t items = 0;        // items scored (after --limit)
  std::int64_t total_items = 0;  // items in the file
  double acc = 0, acc_stderr = 0;
  std::optional<double> acc_norm, acc_norm_stderr;    // multiple choice only
  std::optional<double> acc_bytes, acc_bytes_stderr;  // multiple choice only
  std::optional<double> mean_loglik;                  // completion only: mean log-likelihood of the continuation (nats)
  double chance = 0;                                  // expected acc of uniform guessing (mean of 1/choices); 0 for completion tasks
  std::vector<std::vector<double>> item_logliks;      // [items][choices] log-likelihood of each continuation (nats), as lm-eval logs
};

// The choice each metric picks from one item's log-likelihoods (lm-evaluation-harness 0.4.13,
// MultipleChoiceTask.process_results): acc by the log-likelihood; acc_norm by it divided by len(choice) in
// characters (Unicode code points, the " " delimiter not counted); acc_bytes by it divided by the choice's
// UTF-8 bytes. Ties go to the first choice, as numpy.argmax.
struct ChoicePicks {
  int acc = 0, acc_norm = 0, acc_bytes = 0;
};
ChoicePicks pick_choice(const std::vector<double>& logliks, const std::vector<std::string>& choices);

// Scores the first `limit` items (0 = all). `on_item(done, total)` after each item.
TaskResult run_task(engine::Engine& engine, const tok::Tokenizer& tok, const TaskFile& task, std::int64_t limit,
                    const std::function<void(std::int64_t, std::int64_t)>& on_item = {});

// Standard error of a mean of 0/1 outcomes, as lm-evaluation-harness computes it: sqrt(p(1-p)/(n-1)).
double binomial_stderr(double p, std::int64_t n);

}  // namespace mo::eval
