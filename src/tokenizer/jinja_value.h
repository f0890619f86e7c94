#pragma once
// Values of the chat template interpreter, with the Python semantics jinja2 gives them: None, bool,
// int, float, str, list (and tuple), dict (insertion-ordered, string keys), namespace (a dict shared by
// reference so `set ns.x` is seen everywhere), built-in functions, and jinja2's Undefined.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "mo/tokenizer/chat_template.h"

namespace mo::tok::jinja {

struct Loc {
  int line = 1;
  int column = 1;
};

[[noreturn]] void fail(ChatTemplateError::Kind kind, const Loc& loc, const std::string& message);

class Value;
using List = std::vector<Value>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items;  // in insertion order
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  Loc loc;
};
using Function = std::function<Value(const CallArgs&)>;

enum class Kind : std::uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

class Value {
 public:
  Value() = default;  // Undefined with no hint
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(List items, bool tuple = false);
  static Value dict(Dict d);
  static Value ns(Dict attrs);
  static Value function(std::string name, Function fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_tuple() const { return tuple_; }
  // bool, int or float (Python's bool is an int).
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // bool or int
  double as_double() const;  // bool, int or float
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  // The entries of a dict, or the attributes of a namespace (shared: a namespace is changed in place).
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  Dict& namespace_attrs() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  const Function& as_function() const { return std::get<std::shared_ptr<const Function>>(data_).operator*(); }
  // For an Undefined: jinja2's message when it is used ("'x' is undefined").
  const std::string& undefined_hint() const { return std::get<std::string>(data_); }
  // For a function: its name.
  const std::string& function_name() const { return name_; }

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  std::string name_;
  std::variant<std::string, bool, int64_t, double, std::shared_ptr<const List>, std::shared_ptr<Dict>, std::shared_ptr<const Function>>
      data_;
};

// Python type name for messages: "str", "int", "dict", "NoneType", ...
std::string type_name(const Value& v);
// jinja2's "dict object" / "None" used in "'dict object' has no attribute 'x'" messages.
std::string object_type_repr(const Value& v);

bool truthy(const Value& v);
std::string to_str(const Value& v);   // Python str(); Undefined prints as ""
std::string to_repr(const Value& v);  // Python repr()
bool equals(const Value& a, const Value& b);
// -1, 0 or 1 as Python's <; throws kRuntime for types Python cannot order.
int compare(const Value& a, const Value& b, const Loc& loc);

// Throws jinja2's UndefinedError for `v` when it is undefined (used before attribute access etc.).
void require_defined(const Value& v, const Loc& loc);

Value from_json(const nlohmann::ordered_json& j);

struct JsonStyle {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // none: one line
  std::string item_sep = ", ";        // json.dumps defaults: ", " and ": " (",", ": " with indent)
  std::string key_sep = ": ";
  bool sort_keys = false;
};
// Python json.dumps; throws kRuntime for values JSON cannot hold (Undefined, namespace, function).
std::string to_json(const Value& v, const JsonStyle& style, const Loc& loc);

}  // namespace mo::tok::jinja
