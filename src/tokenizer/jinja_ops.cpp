#include "jinja_ops.h"

#include <cmath>

#include "jinja_limits.h"
#include "jinja_text.h"

namespace mo::tok::jinja {

namespace {

constexpr auto kRuntime = ChatTemplateError::Kind::kRuntime;

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b, const Loc& loc) {
  fail(kRuntime, loc, "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// a op b on int64, failing where Python's unbounded ints would go on.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b, const Loc& loc) {
  int64_t r = 0;
  if (op(a, b, &r)) fail(ChatTemplateError::Kind::kUnsupported, loc, "integer overflow (Python ints are unbounded)");
  return r;
}

bool add(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

Value repeat(const Value& seq, int64_t n, const Loc& loc) {
  const auto times = static_cast<std::size_t>(std::max<int64_t>(0, n));
  const std::size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
  if (unit > 0 && times > (seq.is_string() ? kMaxBytes : kMaxItems) / unit) {  // checked before anything is built
    if (seq.is_string()) check_bytes(kMaxBytes + 1, loc);
    check_items(kMaxItems + 1, loc);
  }
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(out), seq.is_tuple());
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, const Loc& loc) {
  require_defined(a, loc);
  require_defined(b, loc);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_integral() && b.is_integral();
  if (op == "+") {
    if (ints) return Value::integer(checked(add, a.as_int(), b.as_int(), loc));
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string()) fail(kRuntime, loc, "can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.is_list() && !a.is_tuple()) fail(kRuntime, loc, "can only concatenate list (not \"" + type_name(b) + "\") to list");
    unsupported_operands(op, a, b, loc);
  }
  if (op == "-") {
    if (ints) return Value::integer(checked(sub, a.as_int(), b.as_int(), loc));
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported_operands(op, a, b, loc);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked(mul, a.as_int(), b.as_int(), loc));
    if (nums) return Value::number(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(a, b.as_int(), loc);
    if (a.is_integral() && (b.is_string() || b.is_list())) return repeat(b, a.as_int(), loc);
    unsupported_operands(op, a, b, loc);
  }
  if (!nums) {
    if (op == "%" && a.is_string())
      fail(ChatTemplateError::Kind::kUnsupported, loc, "printf-style string formatting ('...' % x) is not supported");
    unsupported_operands(op, a, b, loc);
  }
  if (op == "/") {
    if (b.as_double() == 0) fail(kRuntime, loc, "division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) fail(kRuntime, loc, ints ? "integer division or modulo by zero" : "float floor division by zero");
    if (ints) {
      const int64_t q = floor_div(a.as_int(), b.as_int());
      return Value::integer(op == "//" ? q : a.as_int() - q * b.as_int());
    }
    const double m = py_fmod(a.as_double(), b.as_double());
    if (op == "%") return Value::number(m);
    return Value::number(std::round((a.as_double() - m) / b.as_double()));
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e) result = checked(mul, result, base, loc);
      return Value::integer(result);
    }
    if (a.as_double() == 0 && b.as_double() < 0) fail(kRuntime, loc, "0.0 cannot be raised to a negative power");
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  fail(ChatTemplateError::Kind::kUnsupported, loc, "operator '" + op + "' is not supported");
}

Value negate(const Value& v, const Loc& loc) {
  require_defined(v, loc);
  if (v.is_integral()) return Value::integer(-v.as_int());
  if (v.kind() == Kind::kFloat) return Value::number(-v.as_double());
  fail(kRuntime, loc, "bad operand type for unary -: '" + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item, const Loc& loc) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;  // jinja2's Undefined iterates as empty
    case Kind::kString:
      if (!item.is_string()) fail(kRuntime, loc, "'in <string>' requires string as left operand, not " + type_name(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.as_list())
        if (equals(v, item)) return true;
      return false;
    case Kind::kDict:
      if (item.is_list() && !item.is_tuple()) fail(kRuntime, loc, "unhashable type: 'list'");
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default: fail(kRuntime, loc, "argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value slice(const Value& container, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step, const Loc& loc) {
  require_defined(container, loc);
  if (!container.is_string() && !container.is_list())
    fail(kRuntime, loc, "'" + type_name(container) + "' object is not subscriptable with a slice");
  const int64_t st = step.value_or(1);
  if (st == 0) fail(kRuntime, loc, "slice step cannot be zero");
  std::u32string cps;
  if (container.is_string()) cps = decode_utf8(container.as_string());
  const int64_t len = container.is_string() ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(container.as_list().size());
  const int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? len : len - 1;
  auto clamp = [&](const std::optional<int64_t>& v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t b = clamp(start, st > 0 ? lower : upper);
  const int64_t e = clamp(stop, st > 0 ? upper : lower);
  if (container.is_string()) {
    std::u32string out;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(cps[static_cast<std::size_t>(i)]);
    return Value::string(encode_utf8(out));
  }
  List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(container.as_list()[static_cast<std::size_t>(i)]);
  return Value::list(std::move(out), container.is_tuple());
}

}  // namespace mo::tok::jinja
