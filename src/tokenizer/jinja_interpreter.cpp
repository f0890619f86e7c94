#include "jinja_interpreter.h"

#include <unordered_map>

#include "jinja_builtins.h"
#include "jinja_limits.h"
#include "jinja_ops.h"

namespace mo::tok::jinja {

namespace {

constexpr auto kRuntime = ChatTemplateError::Kind::kRuntime;
constexpr auto kUnsupported = ChatTemplateError::Kind::kUnsupported;

enum class Flow { kNormal, kBreak, kContinue };

using Scope = std::unordered_map<std::string, Value>;

class Interpreter {
 public:
  explicit Interpreter(const Dict& context) {
    Scope globals;
    for (auto& [k, v] : global_functions().items) globals[k] = v;
    scopes_.push_back(std::move(globals));
    Scope vars;
    for (const auto& [k, v] : context.items) vars[k] = v;
    scopes_.push_back(std::move(vars));
    scopes_.emplace_back();  // the template's own top-level {% set %} names
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

 private:
  // ---- statements ----

  Flow exec(const Body& body, std::string& out) {
    for (const StmtPtr& s : body) {
      const Flow flow = exec(*s, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s, std::string& out) {
    const Flow flow = exec_node(s, out);
    check_bytes(out.size(), s.loc);
    return flow;
  }

  Flow exec_node(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText: out += s.text; return Flow::kNormal;
      case Stmt::Kind::kOutput: out += to_str(eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [test, body] : s.branches)
          if (truthy(eval(*test))) return exec(body, out);
        return exec(s.else_body, out);
      case Stmt::Kind::kFor: return exec_for(s, out);
      case Stmt::Kind::kSet: assign(s, eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        Value v = Value::string(render_inner(s.body));
        if (s.filter) v = eval_filter_chain(*s.filter, v);
        assign(s, std::move(v));
        return Flow::kNormal;
      }
      case Stmt::Kind::kFilterBlock: out += to_str(eval_filter_chain(*s.filter, Value::string(render_inner(s.body)))); return Flow::kNormal;
      case Stmt::Kind::kScope: out += render_inner(s.body); return Flow::kNormal;
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  // A block body with its own scope ({% set %} blocks, {% filter %}, {% generation %}).
  std::string render_inner(const Body& body) {
    scopes_.emplace_back();
    std::string buf;
    exec(body, buf);
    scopes_.pop_back();
    return buf;
  }

  void bind(const std::vector<std::string>& targets, const Value& v, const Loc& loc) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = v;
      return;
    }
    require_defined(v, loc);
    const List items = iterate(v, loc);
    if (items.size() != targets.size())
      fail(kRuntime, loc,
           items.size() > targets.size()
               ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
               : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
    for (std::size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = items[i];
  }

  void assign(const Stmt& s, Value v) {
    if (s.attr.empty()) {
      bind(s.targets, v, s.loc);
      return;
    }
    const Value target = lookup(s.targets[0]);
    if (target.kind() != Kind::kNamespace) fail(kRuntime, s.loc, "cannot assign attribute on non-namespace object");
    target.namespace_attrs().set(s.attr, std::move(v));
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    List items = iterate(eval(*s.expr), s.loc);
    if (s.filter) {
      List kept;
      for (Value& item : items) {
        scopes_.emplace_back();
        bind(s.targets, item, s.loc);
        const bool keep = truthy(eval(*s.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      step(s.loc);
      scopes_.emplace_back();
      bind(s.targets, items[static_cast<std::size_t>(i)], s.loc);
      scopes_.back()["loop"] = loop_object(items, i);
      const Flow flow = exec(s.body, out);
      scopes_.pop_back();
      if (flow == Flow::kBreak) break;
    }
    if (n == 0) return exec(s.else_body, out);
    return Flow::kNormal;
  }

  static Value loop_object(const List& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Dict loop;
    loop.set("index", Value::integer(i + 1));
    loop.set("index0", Value::integer(i));
    loop.set("revindex", Value::integer(n - i));
    loop.set("revindex0", Value::integer(n - i - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == n - 1));
    loop.set("length", Value::integer(n));
    loop.set("depth", Value::integer(1));
    loop.set("depth0", Value::integer(0));
    loop.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("there is no next item"));
    loop.set("cycle", Value::function("loop.cycle", [i](const CallArgs& c) {
               if (c.positional.empty()) fail(kRuntime, c.loc, "no items for cycling given");
               return c.positional[static_cast<std::size_t>(i) % c.positional.size()];
             }));
    return Value::dict(std::move(loop));
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  // ---- expressions ----

  void step(const Loc& loc) {
    if (++steps_ > kMaxSteps)
      fail(ChatTemplateError::Kind::kLimit, loc,
           "more than " + std::to_string(kMaxSteps) + " evaluation steps (a loop that does not end?)");
  }

  Value eval(const Expr& e) {
    step(e.loc);
    Value v = eval_node(e);
    if (v.is_string())
      check_bytes(v.as_string().size(), e.loc);
    else if (v.is_list())
      check_items(v.as_list().size(), e.loc);
    return v;
  }

  Value eval_node(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kConst: return e.value;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const ExprPtr& item : e.items) items.push_back(eval(*item));
        return Value::list(std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value key = eval(*e.items[i]);
          if (!key.is_string()) fail(kUnsupported, e.items[i]->loc, "dict keys other than strings are not supported");
          d.set(key.as_string(), eval(*e.items[i + 1]));
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::kGetAttr: return get_attr(eval(*e.a), e.name, e.loc);
      case Expr::Kind::kGetItem: return get_item(eval(*e.a), eval(*e.b), e.loc);
      case Expr::Kind::kSlice: {
        const Value obj = eval(*e.a);
        std::optional<int64_t> bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (!e.items[i]) continue;
          const Value b = eval(*e.items[i]);
          if (b.is_none()) continue;
          if (!b.is_integral()) fail(kRuntime, e.items[i]->loc, "slice indices must be integers or None");
          bounds[i] = b.as_int();
        }
        return slice(obj, bounds[0], bounds[1], bounds[2], e.loc);
      }
      case Expr::Kind::kCall: {
        const Value callee = eval(*e.a);
        const CallArgs args = eval_args(e);
        if (callee.kind() == Kind::kFunction) return callee.as_function()(args);
        require_defined(callee, e.loc);
        fail(kRuntime, e.loc, "'" + type_name(callee) + "' object is not callable");
      }
      case Expr::Kind::kFilter: return eval_filter_chain(e, Value());
      case Expr::Kind::kTest: {
        if (!e.known) fail(kUnsupported, e.loc, "no test named '" + e.name + "'");
        const bool result = apply_test(e.name, eval(*e.a), eval_args(e));
        return Value::boolean(result != e.negated);
      }
      case Expr::Kind::kNeg: return negate(eval(*e.a), e.loc);
      case Expr::Kind::kPos: {
        Value v = eval(*e.a);
        require_defined(v, e.loc);
        if (!v.is_number()) fail(kRuntime, e.loc, "bad operand type for unary +: '" + type_name(v) + "'");
        return v.is_integral() ? Value::integer(v.as_int()) : v;
      }
      case Expr::Kind::kNot: return Value::boolean(!truthy(eval(*e.a)));
      case Expr::Kind::kBinary: return binary_op(e.name, eval(*e.a), eval(*e.b), e.loc);
      case Expr::Kind::kConcat: {
        std::string s;
        for (const ExprPtr& item : e.items) {
          s += to_str(eval(*item));
          check_bytes(s.size(), e.loc);
        }
        return Value::string(std::move(s));
      }
      case Expr::Kind::kCompare: return Value::boolean(eval_compare(e));
      case Expr::Kind::kAnd: {
        Value left = eval(*e.a);
        return truthy(left) ? eval(*e.b) : left;
      }
      case Expr::Kind::kOr: {
        Value left = eval(*e.a);
        return truthy(left) ? left : eval(*e.b);
      }
      case Expr::Kind::kCondExpr:
        if (truthy(eval(*e.b))) return eval(*e.a);
        if (e.c) return eval(*e.c);
        return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
    fail(kUnsupported, e.loc, "unsupported expression");
  }

  CallArgs eval_args(const Expr& e) {
    CallArgs args;
    args.loc = e.loc;
    for (const ExprPtr& item : e.items) args.positional.push_back(eval(*item));
    for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
    return args;
  }

  // A filter node; the innermost filter of a {% filter %} / {% set x | f %} chain filters `input`.
  Value eval_filter_chain(const Expr& e, const Value& input) {
    if (e.kind != Expr::Kind::kFilter) return eval(e);
    if (!e.known) apply_filter(e.name, Value(), CallArgs{{}, {}, e.loc});  // fails naming the filter
    const Value value = e.a ? eval_filter_chain(*e.a, input) : input;
    return apply_filter(e.name, value, eval_args(e));
  }

  bool eval_compare(const Expr& e) {
    Value left = eval(*e.items[0]);
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.items[i + 1]);
      const std::string& op = e.ops[i];
      const Loc& loc = e.items[i + 1]->loc;
      bool ok;
      if (op == "==")
        ok = equals(left, right);
      else if (op == "!=")
        ok = !equals(left, right);
      else if (op == "in")
        ok = contains(right, left, loc);
      else if (op == "not in")
        ok = !contains(right, left, loc);
      else {
        const int c = compare(left, right, loc);
        ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
      }
      if (!ok) return false;
      left = std::move(right);
    }
    return true;
  }

  std::vector<Scope> scopes_;
  std::int64_t steps_ = 0;
};

}  // namespace

std::string render(const Body& body, const Dict& context) { return Interpreter(context).run(body); }

}  // namespace mo::tok::jinja
