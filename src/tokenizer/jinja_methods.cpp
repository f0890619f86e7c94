// Attribute and item access, Python methods of str/list/dict, and the global functions.
#include <ctime>
#include <set>

#include "jinja_args.h"
#include "jinja_builtins.h"
#include "jinja_text.h"

namespace mo::tok::jinja {

namespace {

constexpr auto kRuntime = ChatTemplateError::Kind::kRuntime;
constexpr auto kUnsupported = ChatTemplateError::Kind::kUnsupported;

// Code point index of a byte offset in `s`.
int64_t cp_index(const std::string& s, std::size_t byte) { return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte))); }

bool all_of_cps(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (char32_t cp : decode_utf8(s))
    if (!pred(cp)) return false;
  return true;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix, const Loc& loc) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      fail(kRuntime, loc,
           std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " + type_name(a));
    const std::string& t = a.as_string();
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.as_list())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

Value string_list(const std::vector<std::string>& parts) {
  List out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

std::optional<Value> str_method(const Value& obj, const std::string& name) {
  const std::string s = obj.as_string();
  const std::string what = "str." + name + "()";
  auto method = [&](Function fn) { return Value::function(what, std::move(fn)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return method([=](const CallArgs& c) {
      Args a(c, what, {"chars"});
      return Value::string(py_strip(s, a.text(0), left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool from_right = name == "rsplit";
    return method([=](const CallArgs& c) {
      Args a(c, what, {"sep", "maxsplit"});
      const auto sep = a.text(0);
      if (sep && sep->empty()) fail(kRuntime, c.loc, "empty separator");
      return string_list(py_split(s, sep, a.integer(1, -1), from_right));
    });
  }
  if (name == "splitlines") {
    return method([=](const CallArgs& c) {
      Args a(c, what, {"keepends"});
      const bool keep = a.flag(0, false);
      std::vector<std::string> lines;
      std::size_t start = 0;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\n' && s[i] != '\r') continue;
        std::size_t end = i + (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n' ? 1 : 0);
        lines.push_back(s.substr(start, (keep ? end + 1 : i) - start));
        i = end;
        start = end + 1;
      }
      if (start < s.size()) lines.push_back(s.substr(start));
      return string_list(lines);
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([=](const CallArgs& c) {
      Args a(c, what, {"prefix", "start", "end"}, 1);
      if (a.has(1) || a.has(2)) fail(kUnsupported, c.loc, what + " with start/end is not supported");
      return Value::boolean(affix_match(s, a.get(0), prefix, c.loc));
    });
  }
  if (name == "upper")
    return method([=](const CallArgs& c) {
      Args a(c, what, {});
      return Value::string(py_upper(s));
    });
  if (name == "lower")
    return method([=](const CallArgs& c) {
      Args a(c, what, {});
      return Value::string(py_lower(s));
    });
  if (name == "title")
    return method([=](const CallArgs& c) {
      Args a(c, what, {});
      return Value::string(py_title(s));
    });
  if (name == "capitalize")
    return method([=](const CallArgs& c) {
      Args a(c, what, {});
      return Value::string(py_capitalize(s));
    });
  if (name == "replace") {
    return method([=](const CallArgs& c) {
      Args a(c, what, {"old", "new", "count"}, 2);
      return Value::string(py_replace(c.loc, s, a.text(0).value_or(""), a.text(1).value_or(""), a.integer(2, -1)));
    });
  }
  if (name == "find" || name == "rfind" || name == "count") {
    return method([=](const CallArgs& c) {
      Args a(c, what, {"sub"}, 1);
      const std::string sub = a.text(0).value_or("");
      if (name == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
        int64_t n = 0;
        for (std::size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
        return Value::integer(n);
      }
      const std::size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
      return Value::integer(at == std::string::npos ? -1 : cp_index(s, at));
    });
  }
  if (name == "join") {
    return method([=](const CallArgs& c) {
      Args a(c, what, {"iterable"}, 1);
      std::string out;
      bool first = true;
      for (const Value& v : iterate(a.get(0), c.loc)) {
        if (!v.is_string()) fail(kRuntime, c.loc, "sequence item: expected str instance, " + type_name(v) + " found");
        if (!first) out += s;
        first = false;
        out += v.as_string();
      }
      return Value::string(std::move(out));
    });
  }
  static const std::vector<std::pair<std::string, bool (*)(char32_t)>> kPredicates = {
      {"isspace", [](char32_t cp) { return py_isspace(cp); }},
      {"isdigit", [](char32_t cp) { return cp >= '0' && cp <= '9'; }},
      {"isalpha", [](char32_t cp) { return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'); }},
      {"isalnum", [](char32_t cp) { return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9'); }},
  };
  if (name == "islower" || name == "isupper") {
    const bool lower = name == "islower";
    return method([=](const CallArgs& c) {
      Args a(c, what, {});
      return Value::boolean(lower ? py_islower(s) : py_isupper(s));
    });
  }
  for (const auto& [pname, pred] : kPredicates) {
    if (name == pname) {
      auto* p = pred;
      return method([=](const CallArgs& c) {
        Args a(c, what, {});
        return Value::boolean(all_of_cps(s, p));
      });
    }
  }
  static const std::set<std::string> kOtherStrMethods = {
      "casefold",     "center",       "encode",    "expandtabs",  "format",     "format_map", "index",     "isascii",
      "isdecimal",    "isidentifier", "isnumeric", "isprintable", "istitle",    "ljust",      "maketrans", "partition",
      "removeprefix", "removesuffix", "rindex",    "rjust",       "rpartition", "swapcase",   "translate", "zfill"};
  if (kOtherStrMethods.count(name)) throw std::invalid_argument(what);
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& obj, const std::string& name) {
  const std::string what = "dict." + name + "()";
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function(what, [obj, name, what](const CallArgs& c) {
      Args a(c, what, {});
      List out;
      for (const auto& [k, v] : obj.as_dict().items) {
        if (name == "items")
          out.push_back(Value::list({Value::string(k), v}, true));
        else
          out.push_back(name == "keys" ? Value::string(k) : v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function(what, [obj, what](const CallArgs& c) {
      Args a(c, what, {"key", "default"}, 1);
      const Value* v = a.get(0).is_string() ? obj.as_dict().find(a.get(0).as_string()) : nullptr;
      return v ? *v : a.get_or(1, Value::none());
    });
  }
  static const std::set<std::string> kOther = {"clear", "copy", "fromkeys", "pop", "popitem", "setdefault", "update"};
  if (kOther.count(name)) throw std::invalid_argument(what);
  return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, const std::string& name) {
  const std::string what = "list." + name + "()";
  if (name == "index" || name == "count") {
    return Value::function(what, [obj, name, what](const CallArgs& c) {
      Args a(c, what, {"value"}, 1);
      int64_t n = 0;
      const List& items = obj.as_list();
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (!equals(items[i], a.get(0))) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") fail(kRuntime, c.loc, to_repr(a.get(0)) + " is not in list");
      return Value::integer(n);
    });
  }
  static const std::set<std::string> kOther = {"append", "clear", "copy", "extend", "insert", "pop", "remove", "reverse", "sort"};
  if (kOther.count(name)) throw std::invalid_argument(what);
  return std::nullopt;
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, const std::string& name, const Loc& loc) {
  try {
    switch (obj.kind()) {
      case Kind::kString: return str_method(obj, name);
      case Kind::kDict: return dict_method(obj, name);
      case Kind::kList: return list_method(obj, name);
      default: return std::nullopt;
    }
  } catch (const std::invalid_argument& e) {
    fail(kUnsupported, loc, std::string("the method ") + e.what() + " is not supported");
  }
}

Value get_attr(const Value& obj, const std::string& name, const Loc& loc) {
  require_defined(obj, loc);
  if (obj.kind() == Kind::kNamespace) {
    const Value* v = obj.namespace_attrs().find(name);
    return v ? *v : no_attribute(obj, name);
  }
  // Python's getattr comes first: d.items is the method even when d has an "items" key.
  if (auto m = bound_method(obj, name, loc)) return *m;
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(name);
    if (v) return *v;
  }
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key, const Loc& loc) {
  require_defined(obj, loc);
  require_defined(key, loc);
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && key.is_integral()) {
    if (obj.is_list()) {
      const List& items = obj.as_list();
      int64_t i = key.as_int();
      if (i < 0) i += static_cast<int64_t>(items.size());
      if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[static_cast<std::size_t>(i)];
    } else {
      const std::u32string cps = decode_utf8(obj.as_string());
      int64_t i = key.as_int();
      if (i < 0) i += static_cast<int64_t>(cps.size());
      if (i >= 0 && i < static_cast<int64_t>(cps.size()))
        return Value::string(encode_utf8(std::u32string(1, cps[static_cast<std::size_t>(i)])));
    }
  }
  // jinja2 falls back to getattr for string keys, and to an Undefined naming the key or index.
  if (key.is_string()) return get_attr(obj, key.as_string(), loc);
  return Value::undefined(object_type_repr(obj) + " has no element " + to_repr(key));
}

List iterate(const Value& v, const Loc& loc) {
  switch (v.kind()) {
    case Kind::kUndefined: return {};
    case Kind::kList: return v.as_list();
    case Kind::kDict: {
      List keys;
      for (const auto& [k, item] : v.as_dict().items) keys.push_back(Value::string(k));
      return keys;
    }
    case Kind::kString: {
      List chars;
      for (char32_t cp : decode_utf8(v.as_string())) chars.push_back(Value::string(encode_utf8(std::u32string(1, cp))));
      return chars;
    }
    default: fail(kRuntime, loc, "'" + type_name(v) + "' object is not iterable");
  }
}

Dict global_functions() {
  Dict g;
  g.set("range", Value::function("range", [](const CallArgs& c) {
          Args a(c, "range()", {"start", "stop", "step"}, 1);
          int64_t start = 0, stop = a.integer(0, 0), step = a.integer(2, 1);
          if (a.has(1)) {
            start = stop;
            stop = a.integer(1, 0);
          }
          if (step == 0) fail(kRuntime, c.loc, "range() arg 3 must not be zero");
          List out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.size() >= 100000) fail(kRuntime, c.loc, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
            out.push_back(Value::integer(i));
          }
          return Value::list(std::move(out));
        }));
  g.set("namespace", Value::function("namespace", [](const CallArgs& c) {
          Dict attrs;
          if (c.positional.size() > 1) fail(kRuntime, c.loc, "namespace() takes at most one positional argument");
          if (!c.positional.empty()) {
            if (!c.positional[0].is_dict()) fail(kRuntime, c.loc, "namespace() argument must be a dict");
            attrs = c.positional[0].as_dict();
          }
          for (const auto& [k, v] : c.keyword) attrs.set(k, v);
          return Value::ns(std::move(attrs));
        }));
  g.set("dict", Value::function("dict", [](const CallArgs& c) {
          Dict d;
          if (!c.positional.empty()) fail(kUnsupported, c.loc, "dict() with positional arguments is not supported");
          for (const auto& [k, v] : c.keyword) d.set(k, v);
          return Value::dict(std::move(d));
        }));
  g.set("raise_exception", Value::function("raise_exception", [](const CallArgs& c) -> Value {
          Args a(c, "raise_exception()", {"message"}, 1);
          fail(ChatTemplateError::Kind::kRaised, c.loc, to_str(a.get(0)));
        }));
  g.set("strftime_now", Value::function("strftime_now", [](const CallArgs& c) {
          Args a(c, "strftime_now()", {"format"}, 1);
          const std::string fmt = a.text(0).value_or("");
          const std::time_t now = std::time(nullptr);
          std::tm local{};
          localtime_r(&now, &local);
          std::string buf(256 + fmt.size() * 4, '\0');
          const std::size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &local);
          buf.resize(n);
          return Value::string(buf);
        }));
  for (const char* name : {"lipsum", "cycler", "joiner"}) {
    g.set(name, Value::function(name, [name = std::string(name)](const CallArgs& c) -> Value {
            fail(kUnsupported, c.loc, "the function " + name + "() is not supported");
          }));
  }
  return g;
}

}  // namespace mo::tok::jinja
