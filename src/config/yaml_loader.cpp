#include "mo/config/yaml_loader.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <sstream>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/file_read.h"
#include "mo/core/strings.h"

namespace mo::config {
namespace {

std::string where(const std::string& source, const YAML::Node& node) { return fmt::format("{}:{}", source, node.Mark().line + 1); }

void load_value(const Field& f, const YAML::Node& value, const std::string& at) {
  if (f.kind == FieldKind::string_list) {
    if (value.IsSequence()) {
      std::vector<std::string> items;
      for (const auto& item : value) {
        if (!item.IsScalar()) throw UsageError(fmt::format("{}: {}: expected a list of strings, got a nested item", at, f.key));
        items.push_back(item.Scalar());
      }
      Schema::set_list(f, items, at);
      return;
    }
    if (value.IsScalar()) return Schema::set_from_text(f, value.Scalar(), at);
  }
  if (value.IsNull()) throw UsageError(fmt::format("{}: {}: expected {}, got no value", at, f.key, f.expected()));
  if (!value.IsScalar()) {
    throw UsageError(fmt::format("{}: {}: expected {}, got a {}", at, f.key, f.expected(), value.IsSequence() ? "list" : "mapping"));
  }
  Schema::set_from_text(f, value.Scalar(), at);
}

// Records where each document starts; the content is read later by YAML::LoadAll.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// yaml-cpp 0.7's LoadAll never returns (and grows without bound) on a ',' where a document should begin: the
// token is never consumed, so the same empty document repeats. The documents are walked first and a repeat refused.
void refuse_stuck_document(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts docs;
  while (parser.HandleNextDocument(docs)) {
    const auto n = docs.starts.size();
    if (n < 2 || docs.starts[n - 1].pos != docs.starts[n - 2].pos) continue;
    const YAML::Mark& at = docs.starts[n - 1];
    const auto pos = static_cast<std::size_t>(at.pos);
    const std::string token = pos < text.size() ? std::string(1, text[pos]) : std::string("end of input");
    throw UsageError(fmt::format("{}:{}: invalid YAML: unexpected '{}' at column {}", source, at.line + 1, token, at.column + 1));
  }
}

}  // namespace

void load_yaml_text(const Schema& schema, const std::string& text, const std::string& source) {
  std::vector<YAML::Node> docs;
  try {
    refuse_stuck_document(text, source);
    docs = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    throw UsageError(fmt::format("{}:{}: invalid YAML: {}", source, e.mark.line + 1, e.msg));
  }
  // A second document would be ignored by a loader that reads one: refused, so no setting is lost unseen.
  for (std::size_t i = 1; i < docs.size(); ++i)
    if (!docs[i].IsNull())
      throw UsageError(
          fmt::format("{}: a second YAML document ('---'); a config is one document, put every key in it", where(source, docs[i])));
  if (docs.empty() || docs[0].IsNull()) return;  // an empty file changes nothing
  const YAML::Node& root = docs[0];
  if (!root.IsMap()) throw UsageError(fmt::format("{}: expected a mapping of keys to values at the top level", source));
  // Every key is checked before any value is applied.
  std::map<std::string, std::string> seen;  // field -> where it was set, to refuse a second setting
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const Field* f = schema.find(key);
    if (!f) {
      std::string msg = fmt::format("{}: unknown key '{}' for '{}'", where(source, kv.first), key, schema.section());
      if (auto near = closest_match(key, schema.keys())) msg += fmt::format(" (did you mean '{}'?)", *near);
      throw UsageError(msg);
    }
    const std::string at = where(source, kv.first);
    if (auto [it, fresh] = seen.emplace(f->key, fmt::format("'{}' at {}", key, at)); !fresh)
      throw UsageError(fmt::format("{}: duplicate key '{}': '{}' is already set by {}; keep one", at, key, f->key, it->second));
  }
  for (const auto& kv : root) load_value(*schema.find(kv.first.Scalar()), kv.second, where(source, kv.first));
}

void load_yaml_file(const Schema& schema, const std::string& path) {
  // Configs are small: 1 MiB refuses /dev/zero and the like before they fill memory.
  load_yaml_text(schema, read_regular_file(path, "config file", kMiB), path);
}

}  // namespace mo::config
