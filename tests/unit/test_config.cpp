#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "mo/budget/budget_config.h"
#include "mo/config/commands.h"
#include "mo/config/yaml_loader.h"
#include "mo/core/error.h"

namespace {

using mo::config::load_yaml_text;
using mo::config::Schema;

// A config struct bound to its schema, as the CLI builds it.
struct Serve {
  mo::config::ServeConfig c;
  Schema s{"serve"};
  Serve() { mo::config::bind(s, c); }
};

std::string usage_error(const Schema& s, const std::string& yaml) {
  try {
    load_yaml_text(s, yaml, "serve.yaml");
  } catch (const mo::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ValidFileSetsTypedFields) {
  Serve cfg;
  auto& [c, s] = cfg;
  load_yaml_text(s,
                 "port: 9000\n"
                 "gpu_memory_utilization: 0.85\n"
                 "enable_prefix_caching: false\n"
                 "served_model_name: demo\n",
                 "serve.yaml");
  EXPECT_EQ(c.port, 9000);
  EXPECT_DOUBLE_EQ(c.gpu_memory_utilization, 0.85);
  EXPECT_FALSE(c.enable_prefix_caching);
  EXPECT_EQ(c.served_model_name, "demo");
  EXPECT_EQ(c.block_size, 16);  // untouched keys keep their defaults
}

TEST(Config, UnknownKeyNamesFileLineAndSuggestion) {
  Serve cfg;
  auto& [c, s] = cfg;
  std::string msg = usage_error(s, "port: 9000\nmax_modle_len: 4096\n");
  EXPECT_EQ(msg, "serve.yaml:2: unknown key 'max_modle_len' for 'serve' (did you mean 'max_model_len'?)");
}

TEST(Config, WrongTypeNamesKeyValueAndExpectation) {
  Serve cfg;
  auto& [c, s] = cfg;
  EXPECT_EQ(usage_error(s, "port: eighty\n"), "serve.yaml:1: port: expected an integer in [1, 65535], got 'eighty'");
  EXPECT_EQ(usage_error(s, "enable_prefix_caching: maybe\n"), "serve.yaml:1: enable_prefix_caching: expected true or false, got 'maybe'");
  EXPECT_EQ(usage_error(s, "port: [1, 2]\n"), "serve.yaml:1: port: expected an integer in [1, 65535], got a list");
  EXPECT_EQ(usage_error(s, "port:\n"), "serve.yaml:1: port: expected an integer in [1, 65535], got no value");
}

TEST(Config, OutOfRangeIsRejected) {
  Serve cfg;
  auto& [c, s] = cfg;
  EXPECT_EQ(usage_error(s, "gpu_memory_utilization: 1.5\n"),
            "serve.yaml:1: gpu_memory_utilization: expected a number in [0.05, 1], got '1.5'");
  EXPECT_EQ(c.gpu_memory_utilization, 0.90);  // a rejected value changes nothing
}

TEST(Config, ChoiceErrorsSuggestTheNearestValue) {
  mo::budget::BudgetConfig c;
  Schema s("budget");
  mo::budget::bind(s, c);
  std::string msg = usage_error(s, "weight_format: awq_int4\n");
  EXPECT_NE(msg.find("weight_format: expected one of auto, fp32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(did you mean 'awq-int4'?)"), std::string::npos) << msg;
}

TEST(Config, FlagValueOverridesTheFileValue) {
  mo::budget::BudgetConfig c;
  Schema s("budget");
  mo::budget::bind(s, c);
  load_yaml_text(s, "max_model_len: 2048\nmax_num_seqs: 4\n", "budget.yaml");
  Schema::set_from_text(*s.find("max-model-len"), "1024", "flag --max-model-len");
  EXPECT_EQ(c.max_model_len, 1024);
  EXPECT_EQ(c.max_num_seqs, 4);
}

TEST(Config, AliasesAndDashesFindTheSameField) {
  mo::config::QuantizeConfig c;
  Schema s("quantize");
  mo::config::bind(s, c);
  load_yaml_text(s, "custom_calibration: data.jsonl\nskip_layers: [lm_head, 29-31]\n", "q.yaml");
  EXPECT_EQ(c.calibration_data, "data.jsonl");
  EXPECT_EQ(c.skip_layers, (std::vector<std::string>{"lm_head", "29-31"}));
  EXPECT_EQ(s.find("calibration-data"), s.find("custom_calibration"));
  Schema::set_from_text(*s.find("skip_layers"), "lm_head, model.layers.31.*", "flag --skip-layers");
  EXPECT_EQ(c.skip_layers, (std::vector<std::string>{"lm_head", "model.layers.31.*"}));
}

TEST(Config, InvalidYamlNamesTheLine) {
  Serve cfg;
  auto& [c, s] = cfg;
  std::string msg = usage_error(s, "port: 1\nhost: [unclosed\n");
  EXPECT_EQ(msg.rfind("serve.yaml:", 0), 0u) << msg;
  EXPECT_NE(msg.find("invalid YAML"), std::string::npos) << msg;
}

TEST(Config, MissingFileIsAUsageErrorNamingIt) {
  Serve cfg;
  auto& [c, s] = cfg;
  try {
    mo::config::load_yaml_file(s, "/nonexistent/serve.yaml");
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "config file not found: /nonexistent/serve.yaml");
  }
}

// Issue 32.14: a key set twice (also as its dashed twin) and a second document are errors, not "the last wins".
TEST(Config, DuplicateKeysAndASecondDocumentAreErrors) {
  Serve cfg;
  auto& [c, s] = cfg;
  EXPECT_EQ(usage_error(s, "max_num_seqs: 4\nport: 1\nmax_num_seqs: 5\n"),
            "serve.yaml:3: duplicate key 'max_num_seqs': 'max_num_seqs' is already set by 'max_num_seqs' at serve.yaml:1; keep one");
  EXPECT_EQ(usage_error(s, "max_num_seqs: 4\nmax-num-seqs: 8\n"),
            "serve.yaml:2: duplicate key 'max-num-seqs': 'max_num_seqs' is already set by 'max_num_seqs' at serve.yaml:1; keep one");
  EXPECT_EQ(usage_error(s, "port: 1\n---\nmax_num_seqs: 8\n"),
            "serve.yaml:3: a second YAML document ('---'); a config is one document, put every key in it");
  EXPECT_EQ(c.port, 8000);                          // nothing of a refused file is applied
  EXPECT_EQ(usage_error(s, "port: 9\n---\n"), "");  // an empty document after it holds nothing to lose
  EXPECT_EQ(c.port, 9);
}

// Found by fuzz_yaml_config: yaml-cpp's LoadAll loops forever on a ',' where a document begins.
TEST(Config, AStrayCommaIsInvalidYamlNotAHang) {
  Serve cfg;
  auto& [c, s] = cfg;
  EXPECT_EQ(usage_error(s, ",port: q\nmax_num_seqs: 4\n"), "serve.yaml:1: invalid YAML: unexpected ',' at column 1");
  EXPECT_EQ(usage_error(s, "port: 1\n---\n  ,\n"), "serve.yaml:3: invalid YAML: unexpected ',' at column 3");
  EXPECT_EQ(c.port, 8000);
}

// Issue 32.13: --config reads only a regular file of at most 1 MiB; a FIFO or a device never hangs or fills memory.
TEST(Config, OnlyARegularFileOfAtMostOneMiBIsAConfig) {
  Serve cfg;
  auto& [c, s] = cfg;
  const auto dir = std::filesystem::temp_directory_path() / ("mo_config_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto fifo = dir / "fifo.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(dir / "big.yaml") << "# " << std::string(2 << 20, 'x') << "\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {fifo.string(), "config file '" + fifo.string() + "' is a FIFO; expected a regular file"},
      {"/dev/zero", "config file '/dev/zero' is a device; expected a regular file"},
      {dir.string(), "config file '" + dir.string() + "' is a directory; expected a regular file"},
      {(dir / "big.yaml").string(),
       "config file '" + (dir / "big.yaml").string() + "' is 2097155 bytes or more; at most 1048576 bytes are read"},
  };
  for (const auto& [path, message] : cases) {
    try {
      mo::config::load_yaml_file(s, path);
      ADD_FAILURE() << path << " was read as a config";
    } catch (const mo::UsageError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Config, PrintedConfigLoadsBackToTheSameValues) {
  mo::budget::BudgetConfig a;
  Schema sa("budget");
  mo::budget::bind(sa, a);
  load_yaml_text(sa, "model_path: llama-2-13b\nweight_format: awq-int4\nmax_model_len: 1024\ncompare_formats: true\n", "in.yaml");
  mo::budget::BudgetConfig b;
  Schema sb("budget");
  mo::budget::bind(sb, b);
  load_yaml_text(sb, sa.to_yaml(), "printed.yaml");
  EXPECT_EQ(b.model_path, "llama-2-13b");
  EXPECT_EQ(b.weight_format, "awq-int4");
  EXPECT_EQ(b.max_model_len, 1024);
  EXPECT_TRUE(b.compare_formats);
  EXPECT_DOUBLE_EQ(b.gpu_memory_utilization, 0.90);
}

// A prompt's leading space or trailing newline changes its tokens: free text is kept as given, while
// names and numbers around it are still trimmed.
TEST(Config, FreeTextKeepsItsSpacesWhereNamesAreTrimmed) {
  mo::config::GenerateConfig c;
  Schema s("generate");
  mo::config::bind(s, c);
  load_yaml_text(s,
                 "prompt: \" Once upon\\n\"\nsystem: \"  Be brief. \"\nstop: [\"\\n\\n\", \" The end\"]\n"
                 "model_path: \"  model.gguf  \"\nmax_tokens: \" 12 \"\n",
                 "generate.yaml");
  EXPECT_EQ(c.prompt, " Once upon\n");
  EXPECT_EQ(c.system, "  Be brief. ");
  EXPECT_EQ(c.stop, (std::vector<std::string>{"\n\n", " The end"}));
  EXPECT_EQ(c.model_path, "model.gguf");
  EXPECT_EQ(c.max_tokens, 12);
  // As a flag: comma-separated stop strings keep their spaces too.
  Schema::set_from_text(*s.find("prompt"), "\tTab first ", "flag --prompt");
  Schema::set_from_text(*s.find("stop"), "\n,  and", "flag --stop");
  EXPECT_EQ(c.prompt, "\tTab first ");
  EXPECT_EQ(c.stop, (std::vector<std::string>{"\n", "  and"}));

  // --print-config writes them so that they load back unchanged.
  c.prompt = " say \"hi\"\\n\n";
  mo::config::GenerateConfig back;
  Schema sb("generate");
  mo::config::bind(sb, back);
  load_yaml_text(sb, s.to_yaml(), "printed.yaml");
  EXPECT_EQ(back.prompt, c.prompt);
  EXPECT_EQ(back.system, c.system);
  EXPECT_EQ(back.stop, c.stop);
}

// Every example in configs/ must load with its command's schema, so the examples never rot.
template <typename Config>
void expect_loads(const std::string& file, const char* section) {
  Config c;
  Schema s(section);
  mo::config::bind(s, c);
  EXPECT_NO_THROW(mo::config::load_yaml_file(s, std::string(MO_SOURCE_DIR) + "/configs/" + file)) << file;
}

TEST(Config, ExampleConfigsLoad) {
  namespace fs = std::filesystem;
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(std::string(MO_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() == ".yaml") ++n;
  }
  EXPECT_GE(n, 4u);
  expect_loads<mo::config::ServeConfig>("serve.yaml", "serve");
  expect_loads<mo::config::BenchConfig>("bench.yaml", "bench");
  expect_loads<mo::config::QuantizeConfig>("quantize/awq-int4.yaml", "quantize");
  expect_loads<mo::config::QuantizeConfig>("quantize/gguf-q4_k_m.yaml", "quantize");
  expect_loads<mo::config::QuantizeConfig>("quantize/gptq-int4.yaml", "quantize");
  {
    mo::budget::BudgetConfig c;
    Schema s("budget");
    mo::budget::bind(s, c);
    EXPECT_NO_THROW(mo::config::load_yaml_file(s, std::string(MO_SOURCE_DIR) + "/configs/budget.yaml"));
  }
}

}  // namespace
