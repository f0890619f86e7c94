#pragma once
// Binds the arguments of a filter, test, method or function call to parameter names, Python style.
#include <string>
#include <vector>

#include "jinja_value.h"

namespace mo::tok::jinja {

class Args {
 public:
  // `what` names the callee in messages ("filter 'default'"); the first `required` names must be given.
  Args(const CallArgs& call, std::string what, std::vector<std::string> names, std::size_t required = 0)
      : call_(call), what_(std::move(what)), names_(std::move(names)), values_(names_.size()), given_(names_.size()) {
    if (call.positional.size() > names_.size())
      fail(ChatTemplateError::Kind::kRuntime, call.loc,
           what_ + " takes at most " + std::to_string(names_.size()) + " arguments (" + std::to_string(call.positional.size()) + " given)");
    for (std::size_t i = 0; i < call.positional.size(); ++i) set(i, call.positional[i]);
    for (const auto& [key, v] : call.keyword) {
      std::size_t i = 0;
      while (i < names_.size() && names_[i] != key) ++i;
      if (i == names_.size())
        fail(ChatTemplateError::Kind::kRuntime, call.loc, what_ + " got an unexpected keyword argument '" + key + "'");
      if (given_[i]) fail(ChatTemplateError::Kind::kRuntime, call.loc, what_ + " got multiple values for '" + key + "'");
      set(i, v);
    }
    for (std::size_t i = 0; i < required; ++i)
      if (!given_[i]) fail(ChatTemplateError::Kind::kRuntime, call.loc, what_ + " is missing the argument '" + names_[i] + "'");
  }

  bool has(std::size_t i) const { return given_[i]; }
  const Value& get(std::size_t i) const { return values_[i]; }
  Value get_or(std::size_t i, Value def) const { return given_[i] ? values_[i] : def; }
  bool flag(std::size_t i, bool def) const { return given_[i] ? truthy(values_[i]) : def; }
  int64_t integer(std::size_t i, int64_t def) const {
    if (!given_[i]) return def;
    if (!values_[i].is_integral())
      fail(ChatTemplateError::Kind::kRuntime, call_.loc, what_ + ": '" + names_[i] + "' must be an integer, not " + type_name(values_[i]));
    return values_[i].as_int();
  }
  // A str argument; none when absent or None.
  std::optional<std::string> text(std::size_t i) const {
    if (!given_[i] || values_[i].is_none()) return std::nullopt;
    if (!values_[i].is_string())
      fail(ChatTemplateError::Kind::kRuntime, call_.loc, what_ + ": '" + names_[i] + "' must be a string, not " + type_name(values_[i]));
    return values_[i].as_string();
  }
  const Loc& loc() const { return call_.loc; }

 private:
  void set(std::size_t i, const Value& v) {
    values_[i] = v;
    given_[i] = true;
  }

  const CallArgs& call_;
  std::string what_;
  std::vector<std::string> names_;
  std::vector<Value> values_;
  std::vector<bool> given_;
};

}  // namespace mo::tok::jinja
