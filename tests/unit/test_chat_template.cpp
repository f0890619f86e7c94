#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "mo/io/gguf.h"
#include "mo/tokenizer/chat_template.h"

namespace {

using mo::tok::ChatMessage;
using mo::tok::ChatTemplateError;
using mo::tok::ChatTemplateOptions;
using Json = nlohmann::ordered_json;

const std::filesystem::path kData = std::filesystem::path(MO_SOURCE_DIR) / "tests" / "data" / "chat_templates";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << "cannot read " << path;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

const Json& manifest() {
  static const Json m = Json::parse(read_file(kData / "goldens.json"));
  return m;
}

// The jinja2 error text recorded by make_chat_goldens.py for a raise_exception() call.
std::string raised_message(const std::string& error) {
  const std::string prefix = "TemplateError: ";
  return error.rfind(prefix, 0) == 0 ? error.substr(prefix.size()) : "";
}

std::string render_case(const std::string& tmpl, const Json& info, const Json& conversation) {
  const bool plain = conversation.size() == 1;  // messages only: use the ChatMessage API
  if (plain) {
    std::vector<ChatMessage> messages;
    for (const auto& m : conversation["messages"]) messages.push_back({m["role"], m["content"]});
    ChatTemplateOptions opt;
    opt.bos_token = info["bos_token"];
    opt.eos_token = info["eos_token"];
    return mo::tok::render_chat_template(tmpl, messages, opt);
  }
  Json context = {{"messages", conversation["messages"]},
                  {"tools", nullptr},
                  {"documents", nullptr},
                  {"add_generation_prompt", true},
                  {"bos_token", info["bos_token"]},
                  {"eos_token", info["eos_token"]}};
  for (auto it = conversation.begin(); it != conversation.end(); ++it) context[it.key()] = it.value();
  return mo::tok::render_chat_template(tmpl, context);
}

// Renders every golden conversation of `name` and compares with what jinja2 rendered.
void check_template(const std::string& name) {
  const Json& info = manifest()["templates"][name];
  ASSERT_FALSE(info.is_null()) << name << " missing from goldens.json";
  const std::string tmpl = read_file(kData / info["file"].get<std::string>());
  int cases = 0;
  for (const auto& c : manifest()["cases"]) {
    if (c["template"] != name) continue;
    ++cases;
    const std::string conv = c["conversation"];
    SCOPED_TRACE(name + " / " + conv);
    const Json& conversation = manifest()["conversations"][conv];
    if (c.contains("golden")) {
      EXPECT_EQ(render_case(tmpl, info, conversation), read_file(kData / c["golden"].get<std::string>()));
      continue;
    }
    try {
      render_case(tmpl, info, conversation);
      ADD_FAILURE() << "expected the template to raise " << c["error"];
    } catch (const ChatTemplateError& e) {
      EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRaised);
      EXPECT_EQ(e.message(), raised_message(c["error"]));
    }
  }
  EXPECT_GE(cases, 2) << name;
}

TEST(ChatTemplateGolden, Llama2) { check_template("llama2"); }
TEST(ChatTemplateGolden, Llama3) { check_template("llama3"); }
TEST(ChatTemplateGolden, Qwen3WithToolsAndReasoning) { check_template("qwen3"); }
TEST(ChatTemplateGolden, MistralInstructV02) { check_template("mistral"); }
TEST(ChatTemplateGolden, MistralLegacyRejectsSystem) { check_template("mistral_legacy"); }
TEST(ChatTemplateGolden, MistralV3WithTools) { check_template("mistral_v3"); }
TEST(ChatTemplateGolden, Phi3) { check_template("phi3"); }
TEST(ChatTemplateGolden, SmolLM2) { check_template("smollm2"); }

TEST(ChatTemplateGolden, EveryTemplateHasATest) {
  const std::set<std::string> tested = {"llama2", "llama3", "qwen3", "mistral", "mistral_legacy", "mistral_v3", "phi3", "smollm2"};
  for (auto it = manifest()["templates"].begin(); it != manifest()["templates"].end(); ++it)
    EXPECT_TRUE(tested.count(it.key())) << it.key() << " has goldens but no test";
}

// One Jinja construct per case, with jinja2's output (tests/data/chat_templates/features.json).
TEST(ChatTemplateFeatures, MatchJinja2) {
  const Json features = Json::parse(read_file(kData / "features.json"));
  ASSERT_GT(features.size(), 50u);
  for (const auto& f : features) {
    const std::string name = f["name"];
    SCOPED_TRACE(name + ": " + f["template"].get<std::string>());
    const bool unsupported = name.rfind("unsupported:", 0) == 0;
    try {
      const std::string out = mo::tok::render_chat_template(f["template"].get<std::string>(), f["context"]);
      if (f.contains("error") || unsupported)
        ADD_FAILURE() << "expected an error, rendered " << out;
      else
        EXPECT_EQ(out, f["output"].get<std::string>());
    } catch (const ChatTemplateError& e) {
      if (unsupported) {
        EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kUnsupported) << e.what();
      } else if (!f.contains("error")) {
        ADD_FAILURE() << "jinja2 renders " << f["output"] << " but we threw: " << e.what();
      } else if (const std::string raised = raised_message(f["error"]); !raised.empty()) {
        EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRaised) << e.what();
        EXPECT_EQ(e.message(), raised);
      } else {
        EXPECT_NE(e.kind(), ChatTemplateError::Kind::kRaised) << e.what();
      }
    }
  }
}

ChatTemplateError render_error(const std::string& tmpl, const Json& context = Json::object()) {
  try {
    mo::tok::render_chat_template(tmpl, context);
  } catch (const ChatTemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << tmpl;
  return ChatTemplateError(ChatTemplateError::Kind::kRuntime, "", 0, 0);
}

TEST(ChatTemplateErrors, UnknownTagNamesTheTagAndItsPosition) {
  const auto e = render_error("line one\n{% if true %}\n  {% frobnicate x %}\n{% endif %}");
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kSyntax);
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 6);
  EXPECT_NE(std::string(e.what()).find("unknown tag 'frobnicate'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("line 3, column 6"), std::string::npos) << e.what();
}

TEST(ChatTemplateErrors, KnownButUnsupportedTagsSaySo) {
  const auto e = render_error("ok\n{% macro greet(name) %}hi {{ name }}{% endmacro %}");
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kUnsupported);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.message(), "the 'macro' tag is not supported");
}

TEST(ChatTemplateErrors, UnknownFilterNamesTheFilterAndLine) {
  const auto e = render_error("{{ x }}\n{{ messages | shuffle }}");
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kUnsupported);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.message(), "no filter named 'shuffle'");
  const auto w = render_error("{{ 'a b' | wordwrap(1) }}");
  EXPECT_EQ(w.message(), "filter 'wordwrap' is not supported");
}

TEST(ChatTemplateErrors, UnknownFilterInAnIfBlockFailsOnlyWhenUsed) {
  EXPECT_EQ(mo::tok::render_chat_template("{% if tools %}{{ tools | pprint }}{% endif %}ok", Json{{"tools", nullptr}}), "ok");
  const auto e = render_error("{% if tools %}\n{{ tools | pprint }}{% endif %}", Json{{"tools", {1}}});
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kUnsupported);
  EXPECT_EQ(e.line(), 2);
}

TEST(ChatTemplateErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  const auto e = render_error("\n\n   {{ raise_exception('Only user and assistant roles are supported!') }}");
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRaised);
  EXPECT_EQ(e.message(), "Only user and assistant roles are supported!");
  EXPECT_EQ(e.line(), 3);
}

TEST(ChatTemplateErrors, UndefinedAttributeIsARuntimeErrorNamingTheVariable) {
  const auto e = render_error("{{ message.content }}");
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRuntime);
  EXPECT_EQ(e.message(), "'message' is undefined");
  const auto nested = render_error("{{ m.a.b }}", Json{{"m", Json::object()}});
  EXPECT_EQ(nested.message(), "'dict object' has no attribute 'a'");
}

TEST(ChatTemplateErrors, SyntaxErrorsAreReportedWhereTheyOccur) {
  const auto unclosed = render_error("{% for m in messages %}{{ m }}");
  EXPECT_EQ(unclosed.kind(), ChatTemplateError::Kind::kSyntax);
  EXPECT_NE(unclosed.message().find("endfor"), std::string::npos) << unclosed.what();
  const auto bad = render_error("a\nb {{ 1 + }}");
  EXPECT_EQ(bad.kind(), ChatTemplateError::Kind::kSyntax);
  EXPECT_EQ(bad.line(), 2);
  EXPECT_EQ(bad.column(), 10);
}

// Captures what the project logger prints while alive.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

const std::vector<ChatMessage> kChat = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
const std::string kChatML =
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
    "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n";

// ChatML in place of a template that cannot run would prompt the model wrongly: an error, and at load.
TEST(ChatTemplateFallback, UnsupportedTemplateIsAnErrorNotChatML) {
  const std::string macro = "{% macro f() %}x{% endmacro %}{{ f() }}";
  try {
    mo::tok::render_chat(macro, kChat, {});
    ADD_FAILURE() << "rendered";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kUnsupported);
  }
  try {
    mo::tok::check_chat_template(macro, "models/m.gguf");
    ADD_FAILURE() << "accepted";
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("models/m.gguf: the model's chat template cannot be used: the 'macro' tag is not supported"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(mo::tok::check_chat_template("{% if x %}unclosed", "m"), mo::UsageError);
  EXPECT_NO_THROW(mo::tok::check_chat_template("", "m"));
  EXPECT_NO_THROW(mo::tok::check_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}", "m"));
}

TEST(ChatTemplateFallback, EmptyTemplateBecomesChatML) {
  LogCapture log;
  EXPECT_EQ(mo::tok::render_chat("", kChat, {}), kChatML);
  EXPECT_NE(log.text().find("no chat template"), std::string::npos) << log.text();
  ChatTemplateOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(mo::tok::render_chat("", {{"user", "Hi"}}, no_prompt), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateFallback, TemplateThatRunsIsUsedAsIs) {
  ChatTemplateOptions opt;
  opt.bos_token = "<s>";
  EXPECT_EQ(mo::tok::render_chat("{{ bos_token }}{% for m in messages %}[{{ m.role }}]{% endfor %}", kChat, opt),
            "<s>[system][user][assistant][user]");
}

TEST(ChatTemplateFallback, RaisedErrorsAreNotHiddenByTheFallback) {
  const std::string tmpl = read_file(kData / "mistral_legacy.jinja");
  try {
    mo::tok::render_chat(tmpl, kChat, {});
    ADD_FAILURE() << "expected raise_exception";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRaised);
    EXPECT_EQ(e.message(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST(ChatTemplateOptions, ExtraContextReachesTheTemplate) {
  ChatTemplateOptions opt;
  opt.extra_context = {{"enable_thinking", false}, {"date_string", "26 Jul 2024"}};
  EXPECT_EQ(mo::tok::render_chat_template(read_file(kData / "qwen3.jinja"), {{"user", "Hi"}}, opt),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(mo::tok::render_chat_template("{{ date_string }}|{{ tools }}|{{ add_generation_prompt }}", {}, opt), "26 Jul 2024|None|True");
}

TEST(ChatTemplateSource, TokenizerConfigGivesTemplateAndTokens) {
  const nlohmann::json config = {
      {"chat_template", "{{ bos_token }}x"}, {"bos_token", {{"content", "<s>"}, {"lstrip", false}}}, {"eos_token", "</s>"}};
  const auto t = mo::tok::chat_template_from_tokenizer_config(config);
  EXPECT_EQ(t.tmpl, "{{ bos_token }}x");
  EXPECT_EQ(t.bos_token, "<s>");
  EXPECT_EQ(t.eos_token, "</s>");
  const nlohmann::json named = {{"chat_template", {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}};
  EXPECT_EQ(mo::tok::chat_template_from_tokenizer_config(named).tmpl, "D");
  EXPECT_EQ(mo::tok::chat_template_from_tokenizer_config(nlohmann::json::object()).tmpl, "");
}

TEST(ChatTemplateSource, SharedTokenizerConfigMatchesTheCheckedInCopy) {
  const std::filesystem::path path = std::filesystem::path(MO_SHARED_DATA) / "tokenizers/hf/qwen3/tokenizer_config.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const auto t = mo::tok::chat_template_from_tokenizer_config(nlohmann::json::parse(read_file(path)));
  EXPECT_EQ(t.tmpl, read_file(kData / "qwen3.jinja"));
  EXPECT_EQ(t.eos_token, "<|im_end|>");
}

TEST(ChatTemplateSource, GgufGivesTemplateAndTokenTexts) {
  const std::filesystem::path path = std::filesystem::path(MO_SHARED_DATA) / "tokenizers/llama-cpp-vocab/ggml-vocab-phi-3.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const auto t = mo::tok::chat_template_from_gguf(mo::gguf::read_metadata(path.string()));
  EXPECT_EQ(t.tmpl, read_file(kData / "phi3.jinja"));
  EXPECT_EQ(t.bos_token, "<s>");
  EXPECT_EQ(t.eos_token, "<|endoftext|>");
}

}  // namespace

namespace {

ChatTemplateError limit_error(const std::string& tmpl) {
  const auto e = render_error(tmpl);
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kLimit) << e.what();
  return e;
}

std::string repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

// Hostile templates end in a clear error, never a crash, a hang or memory exhaustion.
TEST(ChatTemplateLimits, DeepNestingIsRefusedNotAStackOverflow) {
  EXPECT_NE(std::string(limit_error("{{ " + repeated("(", 4500) + "1" + repeated(")", 4500) + " }}").what()).find("nests deeper than"),
            std::string::npos);
  limit_error("{{ " + repeated("[", 5300) + repeated("]", 5300) + " }}");
  limit_error("{{ " + repeated("not ", 5000) + "1 }}");
  limit_error("{{ " + repeated("-", 5000) + "1 }}");
  limit_error(repeated("{% if true %}", 3000) + repeated("{% endif %}", 3000));
  limit_error("{{ 1" + repeated(" + 1", 100000) + " }}");  // a left-deep chain, as deep as it is long
  limit_error("{{ x" + repeated(".a", 100000) + " }}");
  EXPECT_EQ(mo::tok::render_chat_template("{{ " + repeated("(", 50) + "1" + repeated(")", 50) + " }}", Json::object()), "1");
}

TEST(ChatTemplateLimits, RunawayLoopsAndGrowthStop) {
  EXPECT_NE(std::string(limit_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").what())
                .find("evaluation steps"),
            std::string::npos);
  limit_error("{{ 'x' * 1000000000 }}");
  limit_error("{{ [1, 2] * 1000000000 }}");
  limit_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}");
  limit_error("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('x', 'xx') %}{% endfor %}");
  limit_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = [ns.s, ns.s] | join %}{% endfor %}");
  limit_error("{{ {'a': [1, 2]} | tojson(indent=99999999) }}");
  limit_error(repeated("{{ 'x' * 10000000 }}", 8));  // each piece fits, the output does not
}

// A fuzz finding: a hex/octal/binary literal past 64 bits threw std::out_of_range out of the lexer
// (and ended the process); it is a template error that names the literal, as decimal ones already were.
TEST(ChatTemplateLimits, IntegerLiteralsPast64BitsAreATemplateError) {
  const std::vector<std::string> literals = {"0x1ffffffffffffffff", "0o7777777777777777777777777", "0b1" + std::string(70, '0'),
                                             "99999999999999999999"};
  for (const std::string& lit : literals) {
    try {
      mo::tok::render_chat_template("{{ " + lit + " }}", Json::object());
      ADD_FAILURE() << lit << " rendered";
    } catch (const ChatTemplateError& e) {
      EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kUnsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("number out of range: " + lit), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(mo::tok::render_chat_template("{{ 0xff }}", Json::object()), "255");
}
