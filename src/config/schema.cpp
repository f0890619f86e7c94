#include "mo/config/schema.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>

#include "mo/core/error.h"
#include "mo/core/strings.h"

namespace mo::config {
namespace {

std::string normalise(std::string_view key) {
  std::string k(key);
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

// "a, b" -> "a", " b": the items of a free-text list keep their spaces.
std::vector<std::string> split_kept(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t at = text.find(',', start);
    out.emplace_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// A string as YAML reads it back: plain when that is unambiguous, else double-quoted (a prompt with a
// leading space or a newline, a stop string "\n\n"); a JSON string is a valid YAML double-quoted scalar.
std::string yaml_scalar(const std::string& v) {
  const bool edge_space =
      !v.empty() && (std::isspace(static_cast<unsigned char>(v.front())) || std::isspace(static_cast<unsigned char>(v.back())));
  const bool control = std::any_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  if (!v.empty() && !edge_space && !control && v.find_first_of(":#{}[],&*!|>'\"%@`\\") == std::string::npos) return v;
  return nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

[[noreturn]] void bad_value(const Field& f, const std::string& text, const std::string& where) {
  throw UsageError(fmt::format("{}: {}: expected {}, got '{}'", where, f.key, f.expected(), text));
}

void check_range(const Field& f, double v, const std::string& text, const std::string& where) {
  if ((f.min && v < *f.min) || (f.max && v > *f.max)) bad_value(f, text, where);
}

}  // namespace

std::string dashed(std::string_view key) {
  std::string k(key);
  std::replace(k.begin(), k.end(), '_', '-');
  return k;
}

Field& Field::range(std::optional<double> lo, std::optional<double> hi) {
  min = lo;
  max = hi;
  return *this;
}

Field& Field::one_of(std::vector<std::string> allowed) {
  choices = std::move(allowed);
  return *this;
}

Field& Field::alias(std::string name) {
  aliases.push_back(std::move(name));
  return *this;
}

Field& Field::as_positional() {
  positional = true;
  return *this;
}

Field& Field::keep_spaces() {
  verbatim = true;
  return *this;
}

Field& Field::placeholder(std::string name) {
  value_name = std::move(name);
  return *this;
}

std::string Field::expected() const {
  std::string base;
  switch (kind) {
    case FieldKind::string: return choices.empty() ? "a string" : "one of " + join(choices);
    case FieldKind::boolean: return "true or false";
    case FieldKind::string_list: return "a list of strings";
    case FieldKind::integer: base = "an integer"; break;
    case FieldKind::number: base = "a number"; break;
  }
  if (min && max) return fmt::format("{} in [{}, {}]", base, number_text(*min), number_text(*max));
  if (min) return fmt::format("{} >= {}", base, number_text(*min));
  if (max) return fmt::format("{} <= {}", base, number_text(*max));
  return base;
}

std::string Field::current_text() const {
  switch (kind) {
    case FieldKind::string: return *static_cast<std::string*>(target);
    case FieldKind::integer: return std::to_string(*static_cast<std::int64_t*>(target));
    case FieldKind::number: return number_text(*static_cast<double*>(target));
    case FieldKind::boolean: return *static_cast<bool*>(target) ? "true" : "false";
    case FieldKind::string_list: return "[" + join(*static_cast<std::vector<std::string>*>(target)) + "]";
  }
  return {};
}

Field& Schema::push(std::string key, std::string help, FieldKind kind, void* target) {
  Field& f = fields_.emplace_back();
  f.key = std::move(key);
  f.help = std::move(help);
  f.kind = kind;
  f.target = target;
  f.default_text = f.current_text();
  return f;
}

Field& Schema::add(std::string key, std::string* t, std::string help) {
  return push(std::move(key), std::move(help), FieldKind::string, t);
}
Field& Schema::add(std::string key, std::int64_t* t, std::string help) {
  return push(std::move(key), std::move(help), FieldKind::integer, t);
}
Field& Schema::add(std::string key, double* t, std::string help) { return push(std::move(key), std::move(help), FieldKind::number, t); }
Field& Schema::add(std::string key, bool* t, std::string help) { return push(std::move(key), std::move(help), FieldKind::boolean, t); }
Field& Schema::add(std::string key, std::vector<std::string>* t, std::string help) {
  return push(std::move(key), std::move(help), FieldKind::string_list, t);
}

const Field* Schema::find(std::string_view key) const {
  std::string k = normalise(key);
  for (const auto& f : fields_) {
    if (f.key == k) return &f;
    for (const auto& a : f.aliases)
      if (normalise(a) == k) return &f;
  }
  return nullptr;
}

std::vector<std::string> Schema::keys() const {
  std::vector<std::string> out;
  for (const auto& f : fields_) {
    out.push_back(f.key);
    out.insert(out.end(), f.aliases.begin(), f.aliases.end());
  }
  return out;
}

void Schema::set_from_text(const Field& f, const std::string& raw, const std::string& where) {
  // Names, paths, enums and numbers are trimmed; free text (a prompt, a stop string) is not.
  std::string text = f.verbatim ? raw : trim(raw);
  switch (f.kind) {
    case FieldKind::string: {
      if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), text) == f.choices.end()) {
        std::string msg = fmt::format("{}: {}: expected {}, got '{}'", where, f.key, f.expected(), text);
        if (auto near = closest_match(text, f.choices)) msg += fmt::format(" (did you mean '{}'?)", *near);
        throw UsageError(msg);
      }
      *static_cast<std::string*>(f.target) = text;
      return;
    }
    case FieldKind::integer: {
      std::int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty()) bad_value(f, text, where);
      check_range(f, static_cast<double>(v), text, where);
      *static_cast<std::int64_t*>(f.target) = v;
      return;
    }
    case FieldKind::number: {
      double v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty() || !std::isfinite(v)) bad_value(f, text, where);
      check_range(f, v, text, where);
      *static_cast<double*>(f.target) = v;
      return;
    }
    case FieldKind::boolean: {
      std::string t = to_lower(text);
      if (t == "true" || t == "yes" || t == "on" || t == "1")
        *static_cast<bool*>(f.target) = true;
      else if (t == "false" || t == "no" || t == "off" || t == "0")
        *static_cast<bool*>(f.target) = false;
      else
        bad_value(f, text, where);
      return;
    }
    case FieldKind::string_list: {
      // On the command line a list is comma-separated: --skip-layers lm_head,29-31
      std::vector<std::string> items;
      for (auto& item : f.verbatim ? split_kept(text) : split_trimmed(text))
        if (!item.empty()) items.push_back(std::move(item));
      *static_cast<std::vector<std::string>*>(f.target) = std::move(items);
      return;
    }
  }
}

void Schema::set_list(const Field& f, const std::vector<std::string>& items, const std::string& where) {
  if (f.kind != FieldKind::string_list) bad_value(f, "[" + join(items) + "]", where);
  *static_cast<std::vector<std::string>*>(f.target) = items;
}

std::string Schema::to_yaml() const {
  std::string out = fmt::format("# model-optimizer {} — every key with its current value\n", section_);
  for (const auto& f : fields_) {
    out += fmt::format("\n# {} ({}; default: {})\n", f.help, f.expected(), f.default_text.empty() ? "\"\"" : f.default_text);
    std::string v = f.current_text();
    if (f.kind == FieldKind::string) {
      v = yaml_scalar(v);
    } else if (f.kind == FieldKind::string_list) {
      std::vector<std::string> items;
      for (const auto& item : *static_cast<std::vector<std::string>*>(f.target)) items.push_back(yaml_scalar(item));
      v = "[" + join(items) + "]";
    }
    out += fmt::format("{}: {}\n", f.key, v);
  }
  return out;
}

}  // namespace mo::config
