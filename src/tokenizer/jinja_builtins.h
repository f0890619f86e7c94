#pragma once
// The filters, tests, methods and global functions a chat template can call, with jinja2's and
// Python's behaviour (transformers' tojson, raise_exception and strftime_now included).
#include <optional>
#include <string>

#include "jinja_value.h"

namespace mo::tok::jinja {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// Whether jinja2 has the filter or test even though this subset does not (for a clearer message).
bool is_jinja_filter(const std::string& name);
bool is_jinja_test(const std::string& name);

Value apply_filter(const std::string& name, const Value& value, const CallArgs& args);
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);

// `obj.name` for a method of str, list or dict ("strip", "items", ...): the method bound to `obj`.
// nullopt when Python has no such method; throws kUnsupported for real methods this subset lacks.
std::optional<Value> bound_method(const Value& obj, const std::string& name, const Loc& loc);

// range, namespace, dict, raise_exception, strftime_now, and jinja2's other globals (which fail
// with kUnsupported when called).
Dict global_functions();

// `obj.name` and `obj[key]` as jinja2's sandboxed getattr/getitem do them: a missing key gives an
// Undefined that names it; an undefined `obj` throws.
Value get_attr(const Value& obj, const std::string& name, const Loc& loc);
Value get_item(const Value& obj, const Value& key, const Loc& loc);
// The items a for loop over `v` visits: list items, dict keys, string characters; none for Undefined.
List iterate(const Value& v, const Loc& loc);

}  // namespace mo::tok::jinja
