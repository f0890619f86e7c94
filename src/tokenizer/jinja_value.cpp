#include "jinja_value.h"

#include <algorithm>
#include <cmath>

#include "jinja_text.h"

namespace mo::tok::jinja {

void fail(ChatTemplateError::Kind kind, const Loc& loc, const std::string& message) {
  throw ChatTemplateError(kind, message, loc.line, loc.column);
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::move(s);
  return v;
}

Value Value::list(List items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = tuple;
  v.data_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::ns(Dict attrs) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::make_shared<Dict>(std::move(attrs));
  return v;
}

Value Value::function(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.name_ = std::move(name);
  v.data_ = std::make_shared<const Function>(std::move(fn));
  return v;
}

int64_t Value::as_int() const { return kind_ == Kind::kBool ? (as_bool() ? 1 : 0) : std::get<int64_t>(data_); }

double Value::as_double() const { return kind_ == Kind::kFloat ? std::get<double>(data_) : static_cast<double>(as_int()); }

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return v.is_tuple() ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "builtin_function_or_method";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.kind() == Kind::kNamespace) return "jinja2.utils.Namespace object";
  return type_name(v) + " object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.as_bool();
    case Kind::kInt: return v.as_int() != 0;
    case Kind::kFloat: return v.as_double() != 0;
    case Kind::kString: return !v.as_string().empty();
    case Kind::kList: return !v.as_list().empty();
    case Kind::kDict: return !v.as_dict().items.empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "";
    case Kind::kString: return v.as_string();
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(v.as_int());
    case Kind::kFloat: return py_float_repr(v.as_double());
    case Kind::kString: return py_str_repr(v.as_string());
    case Kind::kList: {
      const List& items = v.as_list();
      std::string out = v.is_tuple() ? "(" : "[";
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += to_repr(items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : v.as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += py_str_repr(k) + ": " + to_repr(item);
      }
      out += "}";
      return v.kind() == Kind::kNamespace ? "<Namespace " + out + ">" : out;
    }
    case Kind::kFunction: return "<built-in function " + v.function_name() + ">";
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.as_string() == b.as_string();
    case Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Kind::kDict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, item] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equals(item, *other)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return &a.namespace_attrs() == &b.namespace_attrs();
    case Kind::kFunction: return &a.as_function() == &b.as_function();
    default: return false;
  }
}

void require_defined(const Value& v, const Loc& loc) {
  if (v.is_undefined()) {
    const std::string& hint = v.undefined_hint();
    fail(ChatTemplateError::Kind::kRuntime, loc, hint.empty() ? "value is undefined" : hint);
  }
}

int compare(const Value& a, const Value& b, const Loc& loc) {
  require_defined(a, loc);
  require_defined(b, loc);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i], loc);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail(ChatTemplateError::Kind::kRuntime, loc, "'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case T::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

namespace {

void json_dump(const Value& v, const JsonStyle& style, const Loc& loc, int depth, std::string& out) {
  auto newline = [&](int level) {
    out += "\n";
    for (int i = 0; i < level; ++i) out += *style.indent;
  };
  switch (v.kind()) {
    case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(v.as_int()); return;
    case Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d < 0 ? "-Infinity" : "Infinity";
      else
        out += py_float_repr(d);
      return;
    }
    case Kind::kString: out += json_quote(v.as_string(), style.ensure_ascii); return;
    case Kind::kList: {
      const List& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += style.item_sep;
        if (style.indent) newline(depth + 1);
        json_dump(items[i], style, loc, depth + 1, out);
      }
      if (style.indent) newline(depth);
      out += "]";
      return;
    }
    case Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.as_dict().items) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (style.sort_keys) std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
      out += "{";
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (i) out += style.item_sep;
        if (style.indent) newline(depth + 1);
        out += json_quote(entries[i]->first, style.ensure_ascii) + style.key_sep;
        json_dump(entries[i]->second, style, loc, depth + 1, out);
      }
      if (style.indent) newline(depth);
      out += "}";
      return;
    }
    default: fail(ChatTemplateError::Kind::kRuntime, loc, "Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style, const Loc& loc) {
  std::string out;
  json_dump(v, style, loc, 0, out);
  return out;
}

}  // namespace mo::tok::jinja
