#pragma once
// A config schema binds YAML keys and CLI flags to the fields of a typed config struct, so one
// description gives defaults, help text, validation, flag overrides and the docs' key reference.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace mo::config {

enum class FieldKind { string, integer, number, boolean, string_list };

struct Field {
  std::string key;                   // snake_case YAML key; the flag is --key and its dashed twin
  std::vector<std::string> aliases;  // other accepted names (YAML and flags)
  std::string help;                  // one line for --help and generated docs
  FieldKind kind = FieldKind::string;
  void* target = nullptr;            // the bound struct member
  std::optional<double> min, max;    // numeric range, inclusive
  std::vector<std::string> choices;  // allowed values of a string field (empty: any)
  std::string default_text;          // the value at bind time, as text
  std::string value_name;            // shown in --help, e.g. "GIB", "FILE"
  bool positional = false;           // also accepted as a bare argument, in declaration order
  bool verbatim = false;             // free text (a prompt): kept as given, not trimmed

  Field& range(std::optional<double> lo, std::optional<double> hi);
  Field& one_of(std::vector<std::string> allowed);
  Field& alias(std::string name);
  Field& placeholder(std::string name);
  Field& as_positional();
  Field& keep_spaces();  // marks free text whose leading/trailing spaces and newlines matter

  // What a valid value looks like, for errors and help: "an integer >= 1", "one of fp16, bf16".
  std::string expected() const;
  // The bound member's current value as text (lists as "[a, b]").
  std::string current_text() const;
};

class Schema {
 public:
  explicit Schema(std::string section) : section_(std::move(section)) {}

  Field& add(std::string key, std::string* target, std::string help);
  Field& add(std::string key, std::int64_t* target, std::string help);
  Field& add(std::string key, double* target, std::string help);
  Field& add(std::string key, bool* target, std::string help);
  Field& add(std::string key, std::vector<std::string>* target, std::string help);

  const std::string& section() const { return section_; }
  const std::deque<Field>& fields() const { return fields_; }
  // Looks a key up by its name or an alias; '-' and '_' are the same.
  const Field* find(std::string_view key) const;
  std::vector<std::string> keys() const;

  // Parses `text` as the field's type, checks it and stores it. `where` names the source for
  // errors ("serve.yaml:4" or "flag --port"); throws UsageError naming it, the key, the value and
  // what was expected.
  static void set_from_text(const Field& f, const std::string& text, const std::string& where);
  static void set_list(const Field& f, const std::vector<std::string>& items, const std::string& where);

  // The current values as commented YAML (what --print-config shows).
  std::string to_yaml() const;

 private:
  Field& push(std::string key, std::string help, FieldKind kind, void* target);
  std::string section_;
  std::deque<Field> fields_;  // deque: references returned by add() stay valid
};

// "max_model_len" -> "max-model-len"
std::string dashed(std::string_view key);

}  // namespace mo::config
