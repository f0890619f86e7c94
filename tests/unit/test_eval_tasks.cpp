// Multiple-choice task files: parsing errors a user can act on, and scoring on stories260K.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/eval/tasks.h"
#include "mo/model/model_files.h"

namespace {

const std::string kData = MO_SHARED_DATA;
const std::string kStories = kData + "/models/stories260K.gguf";

std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string error_of(const std::string& text) {
  const std::string path = temp_file("task.jsonl", text);
  try {
    mo::eval::load_task_file(path);
  } catch (const mo::UsageError& e) {
    std::string msg = e.what();
    std::filesystem::remove(path);
    return msg.substr(msg.find(".jsonl") + 6);  // the part after the path
  }
  std::filesystem::remove(path);
  return "no error";
}

TEST(EvalTaskFile, ErrorsNameTheLineAndTheField) {
  EXPECT_EQ(error_of("{\"query\": \"q\", \"choices\": [\"a\", \"b\"], \"gold\": 0}\n{\"query\": \"q\", \"choices\": [\"a\"]}\n"),
            ":2: missing field \"gold\"");
  EXPECT_EQ(error_of("{\"query\": \"q\", \"choices\": [\"a\", \"b\"], \"gold\": 2}\n"),
            ":1: field \"gold\" must be an index between 0 and 1");
  EXPECT_EQ(error_of("{\"choices\": [\"a\"], \"gold\": 0}\n"), ":1: missing field \"query\"");
  EXPECT_EQ(error_of("{\"query\": \"q\", \"choices\": [], \"gold\": 0}\n"), ":1: field \"choices\" must be a non-empty list of strings");
  EXPECT_EQ(error_of("{\"text\": \"x\"}\n"),
            ":1: expected the fields query/choices/gold, context_options/continuation/gold or context/continuation");
  EXPECT_EQ(error_of("\n\n"), ": no items");
  EXPECT_NE(error_of("{not json\n").find(":1: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("{\"query\": \"q\", \"choices\": [\"a\"], \"gold\": 1e99999}\n").find(":1: not valid JSON"), std::string::npos);
}

TEST(EvalTaskFile, ReadsTheThreeLayouts) {
  const std::string path = temp_file("layouts.jsonl",
                                     "{\"query\": \"Q:\", \"choices\": [\"a\", \"b\"], \"gold\": 1}\r\n"
                                     "{\"context_options\": [\"A went\", \"B went\"], \"continuation\": \"home.\", \"gold\": 0}\n");
  const auto t = mo::eval::load_task_file(path);
  ASSERT_EQ(t.items.size(), 2u);
  EXPECT_EQ(t.items[0].continuations, (std::vector<std::string>{" a", " b"}));
  EXPECT_EQ(t.items[0].contexts, (std::vector<std::string>{"Q:", "Q:"}));
  EXPECT_EQ(t.items[1].contexts, (std::vector<std::string>{"A went", "B went"}));
  EXPECT_EQ(t.items[1].continuations, (std::vector<std::string>{" home.", " home."}));
  EXPECT_EQ(t.items[1].gold, 0);
  std::filesystem::remove(path);
}

TEST(EvalTaskFile, StandardErrorIsTheSampleOne) {
  EXPECT_NEAR(mo::eval::binomial_stderr(0.5, 101), 0.05, 1e-12);
  EXPECT_EQ(mo::eval::binomial_stderr(1.0, 10), 0.0);
}

// lm-evaluation-harness 0.4.13's rules on hand-made log-likelihoods: acc_norm divides by the choice's characters
// without the " " delimiter, acc_bytes by its UTF-8 bytes. Each item is built so that a wrong rule picks otherwise.
TEST(EvalTaskScoring, PicksFollowLmEvalRules) {
  struct Item {
    std::vector<double> ll;
    std::vector<std::string> choices;
    int gold;
  };
  const std::vector<Item> fixture = {
      // per character -1.5 vs -1.4 picks "abc"; counting the delimiter (-1.0 vs -1.05) would pick "ab".
      {{-3.0, -4.2}, {"ab", "abc"}, 1},
      // "\xc3\xa9t\xc3\xa9" is 3 characters, 5 bytes: per character -1.1 vs -1.0 picks "abcd", per byte -0.66 vs -1.0 not.
      {{-3.3, -4.0}, {"\xc3\xa9t\xc3\xa9", "abcd"}, 0},
      // equal scores go to the first choice, as numpy.argmax.
      {{-2.0, -2.0, -5.0}, {"xy", "zw", "q"}, 0},
      // the raw log-likelihood picks the short choice, per character the long one (-1.0 vs -1.5).
      {{-6.0, -4.5}, {"longer", "abc"}, 0},
  };
  const std::vector<mo::eval::ChoicePicks> expected = {{0, 1, 1}, {0, 1, 0}, {0, 0, 0}, {1, 0, 0}};
  double acc = 0, acc_norm = 0, acc_bytes = 0;
  for (std::size_t i = 0; i < fixture.size(); ++i) {
    const auto p = mo::eval::pick_choice(fixture[i].ll, fixture[i].choices);
    EXPECT_EQ(p.acc, expected[i].acc) << i;
    EXPECT_EQ(p.acc_norm, expected[i].acc_norm) << i;
    EXPECT_EQ(p.acc_bytes, expected[i].acc_bytes) << i;
    acc += p.acc == fixture[i].gold;
    acc_norm += p.acc_norm == fixture[i].gold;
    acc_bytes += p.acc_bytes == fixture[i].gold;
  }
  EXPECT_EQ(acc / 4, 0.5);        // items 2 and 3 of 4 (1-based)
  EXPECT_EQ(acc_norm / 4, 0.75);  // items 1, 3, 4
  EXPECT_EQ(acc_bytes / 4, 1.0);
}

// stories260K continues "Once upon a time, there was a little girl named" with "Lily" (its greedy output).
TEST(EvalTasks, StoriesPicksItsOwnContinuationAndScoresTheSameTwice) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  auto files = mo::model::ModelFiles::open(kStories);
  mo::ThreadPool pool(2);
  mo::engine::Engine engine(mo::engine::bind_weights(files), pool);
  auto tok = mo::tok::load_tokenizer_gguf(*files.gguf());
  const std::string path = temp_file(
      "stories.jsonl",
      "{\"query\": \"Once upon a time, there was a little girl named\", \"choices\": [\"table\", \"Lily.\", \"seven\"], \"gold\": 1}\n"
      "{\"query\": \"Once upon a time, there was a little\", \"choices\": [\"girl named Lily.\", \"rock blue\"], \"gold\": 0}\n"
      "{\"context_options\": [\"Once upon a time, there was a little girl named\", \"Tree car rock\"], "
      "\"continuation\": \"Lily.\", \"gold\": 0}\n");
  const auto task = mo::eval::load_task_file(path);
  const auto r = mo::eval::run_task(engine, *tok, task, 0);
  EXPECT_EQ(r.items, 3);
  EXPECT_EQ(r.acc, 1.0);
  EXPECT_EQ(*r.acc_norm, 1.0);
  EXPECT_NEAR(r.chance, (1.0 / 3 + 0.5 + 0.5) / 3, 1e-12);
  const auto again = mo::eval::run_task(engine, *tok, task, 2);
  EXPECT_EQ(again.items, 2);
  EXPECT_EQ(again.total_items, 3);
  EXPECT_EQ(again.acc, 1.0);
  std::filesystem::remove(path);

  const std::string lambada =
      temp_file("lambada.jsonl",
                "{\"context\": \"Once upon a time, there was a little girl named\", \"continuation\": \"Lily\"}\n"
                "{\"context\": \"Once upon a time, there was a little girl named\", \"continuation\": \"Zebra\"}\n");
  const auto c = mo::eval::run_task(engine, *tok, mo::eval::load_task_file(lambada), 0);
  EXPECT_TRUE(c.completion);
  EXPECT_EQ(c.acc, 0.5);  // the greedy continuation is "Lily", never "Zebra"
  EXPECT_FALSE(c.acc_norm.has_value());
  ASSERT_TRUE(c.mean_loglik.has_value());
  EXPECT_LT(*c.mean_loglik, 0.0);
  std::filesystem::remove(lambada);
}

}  // namespace
