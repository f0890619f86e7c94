// jinja2's built-in filters (with transformers' tojson) and tests.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "jinja_args.h"
#include "jinja_builtins.h"
#include "jinja_limits.h"
#include "jinja_ops.h"
#include "jinja_text.h"

namespace mo::tok::jinja {

namespace {

constexpr auto kRuntime = ChatTemplateError::Kind::kRuntime;
constexpr auto kUnsupported = ChatTemplateError::Kind::kUnsupported;

using FilterFn = Value (*)(const Value&, const CallArgs&);
using TestFn = bool (*)(const Value&, const CallArgs&);

// jinja2's make_attrgetter: "a.b.0" looked up item by item; `default` replaces an undefined result.
Value attr_path(const Value& item, const std::string& path, const Value* def, const Loc& loc) {
  Value v = item;
  for (const std::string& part : py_split(path, std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    v = get_item(v, digits ? Value::integer(std::stoll(part)) : Value::string(part), loc);
  }
  if (def && v.is_undefined()) return *def;
  return v;
}

Value fold_case(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(py_lower(v.as_string())) : v;
}

int64_t length_of(const Value& v, const Loc& loc) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(utf8_length(v.as_string()));
    case Kind::kList: return static_cast<int64_t>(v.as_list().size());
    case Kind::kDict: return static_cast<int64_t>(v.as_dict().items.size());
    default: fail(kRuntime, loc, "object of type '" + type_name(v) + "' has no len()");
  }
}

// Python int(str) / float(str): surrounding whitespace and single underscores between digits allowed.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  std::string digits;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[i - 1])) &&
        std::isalnum(static_cast<unsigned char>(s[i + 1])))
      continue;
    digits.push_back(s[i]);
  }
  if (digits.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    const int64_t v = std::stoll(digits, &used, base);
    if (used != digits.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> parse_float(const std::string& text) {
  const std::string s = py_strip(text, std::nullopt, true, true);
  if (s.empty() || s.find('_') != std::string::npos) return std::nullopt;
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Value f_default(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'default'", {"default_value", "boolean"});
  if (v.is_undefined() || (a.flag(1, false) && !truthy(v))) return a.get_or(0, Value::string(""));
  return v;
}

Value f_length(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'length'", {});
  return Value::integer(length_of(v, c.loc));
}

Value f_trim(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'trim'", {"chars"});
  return Value::string(py_strip(to_str(v), a.text(0), true, true));
}

Value f_tojson(const Value& v, const CallArgs& c) {
  // transformers replaces jinja2's tojson with json.dumps(x, ensure_ascii=False, indent=None,
  // separators=None, sort_keys=False): no HTML escaping, keys in their order.
  Args a(c, "filter 'tojson'", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  style.ensure_ascii = a.flag(0, false);
  if (a.has(1) && !a.get(1).is_none()) {
    if (a.get(1).is_string())
      style.indent = a.get(1).as_string();
    else
      style.indent = std::string(static_cast<std::size_t>(std::max<int64_t>(0, check_width(a.integer(1, 0), c.loc))), ' ');
    style.item_sep = ",";
  }
  if (a.has(2) && !a.get(2).is_none()) {
    const Value& sep = a.get(2);
    if (!sep.is_list() || sep.as_list().size() != 2 || !sep.as_list()[0].is_string() || !sep.as_list()[1].is_string())
      fail(kRuntime, c.loc, "tojson: separators must be a pair of strings");
    style.item_sep = sep.as_list()[0].as_string();
    style.key_sep = sep.as_list()[1].as_string();
  }
  style.sort_keys = a.flag(3, false);
  return Value::string(to_json(v, style, c.loc));
}

Value f_string(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'string'", {});
  return Value::string(to_str(v));
}

Value f_upper(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'upper'", {});
  return Value::string(py_upper(to_str(v)));
}

Value f_lower(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'lower'", {});
  return Value::string(py_lower(to_str(v)));
}

Value f_capitalize(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'capitalize'", {});
  return Value::string(py_capitalize(to_str(v)));
}

Value f_title(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'title'", {});
  return Value::string(py_title(to_str(v)));
}

Value f_replace(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'replace'", {"old", "new", "count"}, 2);
  return Value::string(
      py_replace(c.loc, to_str(v), to_str(a.get(0)), to_str(a.get(1)), a.has(2) && !a.get(2).is_none() ? a.integer(2, -1) : -1));
}

Value f_list(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'list'", {});
  return Value::list(iterate(v, c.loc));
}

Value f_join(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'join'", {"d", "attribute"});
  const std::string sep = a.has(0) ? to_str(a.get(0)) : "";
  const auto attribute = a.has(1) && !a.get(1).is_none() ? std::optional<std::string>(to_str(a.get(1))) : std::nullopt;
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v, c.loc)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attribute ? attr_path(item, *attribute, nullptr, c.loc) : item);
    check_bytes(out.size(), c.loc);
  }
  return Value::string(std::move(out));
}

Value f_first(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'first'", {});
  const List items = iterate(v, c.loc);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'last'", {});
  const List items = iterate(v, c.loc);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_reverse(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'reverse'", {});
  if (v.is_string()) {
    std::u32string cps = decode_utf8(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(encode_utf8(cps));
  }
  List items = iterate(v, c.loc);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_int(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'int'", {"default", "base"});
  const Value def = a.get_or(0, Value::integer(0));
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.kind() == Kind::kFloat) return std::isfinite(v.as_double()) ? Value::integer(static_cast<int64_t>(v.as_double())) : def;
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), static_cast<int>(a.integer(1, 10)))) return Value::integer(*i);
    if (auto d = parse_float(v.as_string()); d && std::isfinite(*d)) return Value::integer(static_cast<int64_t>(*d));
  }
  return def;
}

Value f_float(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'float'", {"default"});
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string())
    if (auto d = parse_float(v.as_string())) return Value::number(*d);
  return a.get_or(0, Value::number(0.0));
}

Value f_abs(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'abs'", {});
  require_defined(v, c.loc);
  if (v.is_integral()) return Value::integer(std::llabs(v.as_int()));
  if (v.kind() == Kind::kFloat) return Value::number(std::fabs(v.as_double()));
  fail(kRuntime, c.loc, "bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_round(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'round'", {"precision", "method"});
  const int64_t precision = a.integer(0, 0);
  const std::string method = a.text(1).value_or("common");
  require_defined(v, c.loc);
  if (!v.is_number()) fail(kRuntime, c.loc, "type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_integral()) return Value::integer(v.as_int());
    // printf rounds the exact binary value half-to-even, as Python's round() does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), v.as_double());
    return Value::number(std::stod(buf));
  }
  if (method != "ceil" && method != "floor") fail(kRuntime, c.loc, "method must be common, ceil or floor");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_items(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'items'", {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fail(kRuntime, c.loc, "Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, item] : v.as_dict().items) out.push_back(Value::list({Value::string(k), item}, true));
  return Value::list(std::move(out));
}

Value f_dictsort(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'dictsort'", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail(kRuntime, c.loc, "dictsort: value must be a mapping");
  const bool cs = a.flag(0, false), rev = a.flag(2, false);
  const std::string by = a.text(1).value_or("key");
  const std::size_t pos = by == "key" ? 0 : by == "value" ? 1 : 2;
  if (pos == 2) fail(kRuntime, c.loc, "You can only sort by either \"key\" or \"value\"");
  List items = f_items(v, CallArgs{{}, {}, c.loc}).as_list();
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int r = compare(fold_case(x.as_list()[pos], cs), fold_case(y.as_list()[pos], cs), c.loc);
    return rev ? r > 0 : r < 0;
  });
  return Value::list(std::move(items));
}

Value sorted_items(const Value& v, const CallArgs& c, bool reverse, bool case_sensitive, const Value& attribute) {
  List items = iterate(v, c.loc);
  auto key = [&](const Value& item) {
    const Value k = attribute.is_none() || attribute.is_undefined() ? item : attr_path(item, to_str(attribute), nullptr, c.loc);
    return fold_case(k, case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int r = compare(key(x), key(y), c.loc);
    return reverse ? r > 0 : r < 0;
  });
  return Value::list(std::move(items));
}

Value f_sort(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'sort'", {"reverse", "case_sensitive", "attribute"});
  return sorted_items(v, c, a.flag(0, false), a.flag(1, false), a.get_or(2, Value::none()));
}

Value f_unique(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'unique'", {"case_sensitive", "attribute"});
  const bool cs = a.flag(0, false);
  const Value attribute = a.get_or(1, Value::none());
  List out, seen;
  for (const Value& item : iterate(v, c.loc)) {
    const Value key = fold_case(attribute.is_none() ? item : attr_path(item, to_str(attribute), nullptr, c.loc), cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& v, const CallArgs& c, bool max) {
  Args a(c, max ? "filter 'max'" : "filter 'min'", {"case_sensitive", "attribute"});
  const List items = sorted_items(v, c, max, a.flag(0, false), a.get_or(1, Value::none())).as_list();
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  return items.front();
}

Value f_min(const Value& v, const CallArgs& c) { return min_max(v, c, false); }
Value f_max(const Value& v, const CallArgs& c) { return min_max(v, c, true); }

Value f_sum(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'sum'", {"attribute", "start"});
  Value total = a.get_or(1, Value::integer(0));
  for (const Value& item : iterate(v, c.loc))
    total = binary_op("+", total, a.has(0) && !a.get(0).is_none() ? attr_path(item, to_str(a.get(0)), nullptr, c.loc) : item, c.loc);
  return total;
}

Value f_map(const Value& v, const CallArgs& c) {
  List out;
  const Value* attribute = nullptr;
  const Value* def = nullptr;
  for (const auto& [k, kv] : c.keyword) {
    if (k == "attribute") attribute = &kv;
    if (k == "default") def = &kv;
  }
  if (attribute) {
    for (const Value& item : iterate(v, c.loc)) out.push_back(attr_path(item, to_str(*attribute), def, c.loc));
    return Value::list(std::move(out));
  }
  if (c.positional.empty()) fail(kRuntime, c.loc, "map requires a filter argument");
  const std::string filter = to_str(c.positional[0]);
  if (!has_filter(filter)) fail(kUnsupported, c.loc, "no filter named '" + filter + "'");
  CallArgs rest{{c.positional.begin() + 1, c.positional.end()}, c.keyword, c.loc};
  for (const Value& item : iterate(v, c.loc)) out.push_back(apply_filter(filter, item, rest));
  return Value::list(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value select_items(const Value& v, const CallArgs& c, bool by_attr, bool keep) {
  std::size_t next = 0;
  std::string attribute;
  if (by_attr) {
    if (c.positional.empty()) fail(kRuntime, c.loc, "selectattr/rejectattr need an attribute name");
    attribute = to_str(c.positional[next++]);
  }
  std::string test;
  if (next < c.positional.size()) test = to_str(c.positional[next++]);
  if (!test.empty() && !has_test(test)) fail(kUnsupported, c.loc, "no test named '" + test + "'");
  CallArgs test_args{{c.positional.begin() + static_cast<std::ptrdiff_t>(next), c.positional.end()}, c.keyword, c.loc};
  List out;
  for (const Value& item : iterate(v, c.loc)) {
    const Value subject = by_attr ? attr_path(item, attribute, nullptr, c.loc) : item;
    const bool pass = test.empty() ? truthy(subject) : apply_test(test, subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(const Value& v, const CallArgs& c) { return select_items(v, c, false, true); }
Value f_reject(const Value& v, const CallArgs& c) { return select_items(v, c, false, false); }
Value f_selectattr(const Value& v, const CallArgs& c) { return select_items(v, c, true, true); }
Value f_rejectattr(const Value& v, const CallArgs& c) { return select_items(v, c, true, false); }

Value f_indent(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'indent'", {"width", "first", "blank"});
  const std::string pad = a.has(0) && a.get(0).is_string()
                              ? a.get(0).as_string()
                              : std::string(static_cast<std::size_t>(std::max<int64_t>(0, check_width(a.integer(0, 4), c.loc))), ' ');
  const bool first = a.flag(1, false), blank = a.flag(2, false);
  std::string s = to_str(v) + "\n";
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    lines.push_back(s.substr(start, i - start));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    start = i + 1;
  }
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return Value::string(first ? pad + out : out);
}

Value f_safe(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'safe'", {});
  return Value::string(to_str(v));
}

Value f_escape(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'escape'", {});
  std::string out;
  for (char ch : to_str(v)) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(ch);
    }
  }
  return Value::string(std::move(out));
}

Value f_attr(const Value& v, const CallArgs& c) {
  Args a(c, "filter 'attr'", {"name"}, 1);
  const std::string name = to_str(a.get(0));
  if (v.kind() == Kind::kNamespace || !v.is_dict()) return get_attr(v, name, c.loc);
  if (auto m = bound_method(v, name, c.loc)) return *m;  // attr() never looks at dict keys
  return Value::undefined("'dict object' has no attribute '" + name + "'");
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> kFilters = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"capitalize", f_capitalize},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
  };
  return kFilters;
}

// ---- tests ----

const Value& other(const Value&, const CallArgs& c, const char* name) {
  if (c.positional.size() != 1 || !c.keyword.empty()) fail(kRuntime, c.loc, std::string("test '") + name + "' takes one argument");
  return c.positional[0];
}

bool no_args(const CallArgs& c, const char* name) {
  if (!c.positional.empty() || !c.keyword.empty()) fail(kRuntime, c.loc, std::string("test '") + name + "' takes no arguments");
  return true;
}

bool t_defined(const Value& v, const CallArgs& c) { return no_args(c, "defined") && !v.is_undefined(); }
bool t_undefined(const Value& v, const CallArgs& c) { return no_args(c, "undefined") && v.is_undefined(); }
bool t_none(const Value& v, const CallArgs& c) { return no_args(c, "none") && v.is_none(); }
bool t_boolean(const Value& v, const CallArgs& c) { return no_args(c, "boolean") && v.kind() == Kind::kBool; }
bool t_true(const Value& v, const CallArgs& c) { return no_args(c, "true") && v.kind() == Kind::kBool && v.as_bool(); }
bool t_false(const Value& v, const CallArgs& c) { return no_args(c, "false") && v.kind() == Kind::kBool && !v.as_bool(); }
bool t_integer(const Value& v, const CallArgs& c) { return no_args(c, "integer") && v.kind() == Kind::kInt; }
bool t_float(const Value& v, const CallArgs& c) { return no_args(c, "float") && v.kind() == Kind::kFloat; }
bool t_number(const Value& v, const CallArgs& c) { return no_args(c, "number") && v.is_number(); }
bool t_string(const Value& v, const CallArgs& c) { return no_args(c, "string") && v.is_string(); }
bool t_mapping(const Value& v, const CallArgs& c) { return no_args(c, "mapping") && v.is_dict(); }
bool t_iterable(const Value& v, const CallArgs& c) {
  return no_args(c, "iterable") && (v.is_undefined() || v.is_list() || v.is_dict() || v.is_string());
}
bool t_sequence(const Value& v, const CallArgs& c) {
  return no_args(c, "sequence") && (v.is_undefined() || v.is_list() || v.is_dict() || v.is_string());
}
bool t_callable(const Value& v, const CallArgs& c) { return no_args(c, "callable") && v.kind() == Kind::kFunction; }
bool t_sameas(const Value& v, const CallArgs& c) {
  const Value& o = other(v, c, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kBool: return v.as_bool() == o.as_bool();
    case Kind::kInt: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;  // CPython's cached ints
    case Kind::kNamespace: return &v.namespace_attrs() == &o.namespace_attrs();
    default: return false;
  }
}
bool t_eq(const Value& v, const CallArgs& c) { return equals(v, other(v, c, "eq")); }
bool t_ne(const Value& v, const CallArgs& c) { return !equals(v, other(v, c, "ne")); }
bool t_lt(const Value& v, const CallArgs& c) { return compare(v, other(v, c, "lt"), c.loc) < 0; }
bool t_le(const Value& v, const CallArgs& c) { return compare(v, other(v, c, "le"), c.loc) <= 0; }
bool t_gt(const Value& v, const CallArgs& c) { return compare(v, other(v, c, "gt"), c.loc) > 0; }
bool t_ge(const Value& v, const CallArgs& c) { return compare(v, other(v, c, "ge"), c.loc) >= 0; }
bool t_in(const Value& v, const CallArgs& c) { return contains(other(v, c, "in"), v, c.loc); }
bool t_divisibleby(const Value& v, const CallArgs& c) {
  return equals(binary_op("%", v, other(v, c, "divisibleby"), c.loc), Value::integer(0));
}
bool t_even(const Value& v, const CallArgs& c) {
  return no_args(c, "even") && equals(binary_op("%", v, Value::integer(2), c.loc), Value::integer(0));
}
bool t_odd(const Value& v, const CallArgs& c) {
  return no_args(c, "odd") && equals(binary_op("%", v, Value::integer(2), c.loc), Value::integer(1));
}
bool t_lower(const Value& v, const CallArgs& c) { return no_args(c, "lower") && py_islower(to_str(v)); }
bool t_upper(const Value& v, const CallArgs& c) { return no_args(c, "upper") && py_isupper(to_str(v)); }
bool t_filter(const Value& v, const CallArgs& c) { return no_args(c, "filter") && v.is_string() && has_filter(v.as_string()); }
bool t_test(const Value& v, const CallArgs& c) { return no_args(c, "test") && v.is_string() && has_test(v.as_string()); }
bool t_escaped(const Value&, const CallArgs& c) {
  no_args(c, "escaped");
  return false;  // no value is markupsafe.Markup here
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> kTests = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"sameas", t_sameas},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"divisibleby", t_divisibleby},
      {"even", t_even},
      {"odd", t_odd},
      {"lower", t_lower},
      {"upper", t_upper},
      {"filter", t_filter},
      {"test", t_test},
      {"escaped", t_escaped},
  };
  return kTests;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }
bool has_test(const std::string& name) { return tests().count(name) > 0; }

bool is_jinja_filter(const std::string& name) {
  static const std::set<std::string> kOthers = {"batch",     "center", "filesizeformat", "format",    "groupby",
                                                "pprint",    "random", "slice",          "striptags", "truncate",
                                                "urlencode", "urlize", "wordcount",      "wordwrap",  "xmlattr"};
  return has_filter(name) || kOthers.count(name) > 0;
}

bool is_jinja_test(const std::string& name) { return has_test(name); }

Value apply_filter(const std::string& name, const Value& value, const CallArgs& args) {
  const auto it = filters().find(name);
  if (it == filters().end())
    fail(kUnsupported, args.loc, is_jinja_filter(name) ? "filter '" + name + "' is not supported" : "no filter named '" + name + "'");
  return it->second(value, args);
}

bool apply_test(const std::string& name, const Value& value, const CallArgs& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) fail(kUnsupported, args.loc, "no test named '" + name + "'");
  return it->second(value, args);
}

}  // namespace mo::tok::jinja
