#include "mo/config/yaml_loader.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "mo/core/error.h"
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

}  // namespace

void load_yaml_text(const Schema& schema, const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UsageError(fmt::format("{}:{}: invalid YAML: {}", source, e.mark.line + 1, e.msg));
  }
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap()) throw UsageError(fmt::format("{}: expected a mapping of keys to values at the top level", source));
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const Field* f = schema.find(key);
    if (!f) {
      std::string msg = fmt::format("{}: unknown key '{}' for '{}'", where(source, kv.first), key, schema.section());
      if (auto near = closest_match(key, schema.keys())) msg += fmt::format(" (did you mean '{}'?)", *near);
      throw UsageError(msg);
    }
    load_value(*f, kv.second, where(source, kv.first));
  }
}

void load_yaml_file(const Schema& schema, const std::string& path) {
  require_readable(path, "config file");
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  load_yaml_text(schema, buf.str(), path);
}

}  // namespace mo::config
