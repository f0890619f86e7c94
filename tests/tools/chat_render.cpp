// Prints what our chat template renderer makes of a template and a context, for the Python test that
// compares it with jinja2.
//
//   mo_tool_chat_render TEMPLATE CONTEXT.json             the rendering, byte for byte, on stdout
//   mo_tool_chat_render --fallback TEMPLATE CONTEXT.json  through render_chat (ChatML for an empty template)
//   mo_tool_chat_render --batch JOBS.json                 [{"template": "...", "context": {...}}, ...] ->
//                                                         [{"output": "..."} | {"kind": ..., "message": ...}]
//
// CONTEXT is the template variables: messages, add_generation_prompt, bos_token, eos_token, tools, ...
// Exit status: 0 rendered, 3 ChatTemplateError (kind and message on stderr), 2 usage, 1 other errors.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "mo/core/log.h"
#include "mo/tokenizer/chat_template.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw mo::UsageError("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

const char* kind_name(mo::tok::ChatTemplateError::Kind kind) {
  switch (kind) {
    case mo::tok::ChatTemplateError::Kind::kSyntax: return "syntax";
    case mo::tok::ChatTemplateError::Kind::kUnsupported: return "unsupported";
    case mo::tok::ChatTemplateError::Kind::kRaised: return "raised";
    case mo::tok::ChatTemplateError::Kind::kRuntime: return "runtime";
    case mo::tok::ChatTemplateError::Kind::kLimit: return "limit";
  }
  return "unknown";
}

std::string render_fallback(const std::string& tmpl, const nlohmann::ordered_json& context) {
  std::vector<mo::tok::ChatMessage> messages;
  for (const auto& m : context.value("messages", nlohmann::ordered_json::array()))
    messages.push_back({m.value("role", ""), m.value("content", "")});
  mo::tok::ChatTemplateOptions opt;
  opt.add_generation_prompt = context.value("add_generation_prompt", true);
  opt.bos_token = context.value("bos_token", "");
  opt.eos_token = context.value("eos_token", "");
  return mo::tok::render_chat(tmpl, messages, opt);
}

int batch(const std::string& jobs_path) {
  const auto jobs = nlohmann::ordered_json::parse(read_file(jobs_path));
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& job : jobs) {
    nlohmann::ordered_json r = nlohmann::ordered_json::object();
    try {
      r["output"] = mo::tok::render_chat_template(job.at("template").get<std::string>(), job.at("context"));
    } catch (const mo::tok::ChatTemplateError& e) {
      r["kind"] = kind_name(e.kind());
      r["message"] = e.message();
      r["line"] = e.line();
      r["column"] = e.column();
    }
    results.push_back(std::move(r));
  }
  std::cout << results.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    mo::log::init();
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 2 && args[0] == "--batch") return batch(args[1]);
    const bool fallback = !args.empty() && args[0] == "--fallback";
    if (fallback) args.erase(args.begin());
    if (args.size() != 2) {
      std::cerr << "usage: mo_tool_chat_render [--fallback] TEMPLATE CONTEXT.json | --batch JOBS.json\n";
      return 2;
    }
    const std::string tmpl = read_file(args[0]);
    const auto context = nlohmann::ordered_json::parse(read_file(args[1]));
    std::cout << (fallback ? render_fallback(tmpl, context) : mo::tok::render_chat_template(tmpl, context));
    return 0;
  } catch (const mo::tok::ChatTemplateError& e) {
    std::cerr << "chat template error (" << kind_name(e.kind()) << "): " << e.what() << "\n";
    return 3;
  } catch (const mo::UsageError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
