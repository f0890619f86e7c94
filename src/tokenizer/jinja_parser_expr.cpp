#include <algorithm>

#include "jinja_builtins.h"
#include "jinja_parser_impl.h"

namespace mo::tok::jinja {

namespace {

constexpr auto kSyntax = ChatTemplateError::Kind::kSyntax;
constexpr auto kUnsupported = ChatTemplateError::Kind::kUnsupported;

}  // namespace

// Expressions, lowest precedence first, as in jinja2's parser.py.

bool Parser::tuple_end(const std::vector<std::string>& extra_end) const {
  if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || is_op(")")) return true;
  return cur().type == Tok::kName && std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
}

ExprPtr Parser::parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parens) {
  const Loc loc = cur().loc;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) unexpected("an expression");
  }
  auto t = node_of(Expr::Kind::kTuple, loc);
  t->items = std::move(items);
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  const Nest nest(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr expr = parse_or();
  while (is_name("if")) {
    const Loc loc = advance().loc;
    const bool soft = soft_;
    soft_ = true;
    auto node = node_of(Expr::Kind::kCondExpr, loc);
    node->b = parse_or();
    if (skip_name("else")) node->c = parse_condexpr();
    node->a = std::move(expr);
    soft_ = soft;
    expr = std::move(node);
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    auto node = node_of(Expr::Kind::kOr, advance().loc);
    node->a = std::move(left);
    node->b = parse_and();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    auto node = node_of(Expr::Kind::kAnd, advance().loc);
    node->a = std::move(left);
    node->b = parse_not();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  const Nest nest(*this);
  if (is_name("not")) {
    auto node = node_of(Expr::Kind::kNot, advance().loc);
    node->a = parse_not();
    return node;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Loc loc = cur().loc;
  ExprPtr first = parse_math1();
  auto node = node_of(Expr::Kind::kCompare, loc);
  while (true) {
    std::string op;
    if (cur().type == Tok::kOp &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = advance().text;
    } else if (is_name("in")) {
      advance();
      op = "in";
    } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
      advance();
      advance();
      op = "not in";
    } else {
      break;
    }
    node->ops.push_back(op);
    node->items.push_back(parse_math1());
  }
  if (node->ops.empty()) return first;
  node->items.insert(node->items.begin(), std::move(first));
  return node;
}

ExprPtr Parser::binary(const std::string& op, const Loc& loc, ExprPtr a, ExprPtr b) {
  auto node = node_of(Expr::Kind::kBinary, loc);
  node->name = op;
  node->a = std::move(a);
  node->b = std::move(b);
  return node;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& t = advance();
    const std::string op = t.text;
    const Loc loc = t.loc;
    left = binary(op, loc, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const Loc loc = cur().loc;
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto node = node_of(Expr::Kind::kConcat, loc);
  node->items.push_back(std::move(first));
  while (skip_op("~")) node->items.push_back(parse_math2());
  return node;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = advance();
    const std::string op = t.text;
    const Loc loc = t.loc;
    left = binary(op, loc, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Loc loc = advance().loc;
    left = binary("**", loc, std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const Nest nest(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const Token& t = advance();
    node = node_of(t.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, t.loc);
    node->a = parse_unary(false);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const Loc loc = t.loc;
  if (t.type == Tok::kName) {
    const std::string n = advance().text;
    auto node = node_of(Expr::Kind::kConst, loc);
    if (n == "true" || n == "True") {
      node->value = Value::boolean(true);
    } else if (n == "false" || n == "False") {
      node->value = Value::boolean(false);
    } else if (n == "none" || n == "None") {
      node->value = Value::none();
    } else {
      node->kind = Expr::Kind::kName;
      node->name = n;
    }
    return node;
  }
  if (t.type == Tok::kString) {
    std::string s;
    while (cur().type == Tok::kString) s += advance().text;  // adjacent literals concatenate
    auto node = node_of(Expr::Kind::kConst, loc);
    node->value = Value::string(std::move(s));
    return node;
  }
  if (t.type == Tok::kInt || t.type == Tok::kFloat) {
    auto node = node_of(Expr::Kind::kConst, loc);
    node->value = t.type == Tok::kInt ? Value::integer(t.int_value) : Value::number(t.float_value);
    advance();
    return node;
  }
  if (skip_op("(")) {
    ExprPtr inner = parse_tuple(true, {}, true);
    expect_op(")");
    return inner;
  }
  if (skip_op("[")) {
    auto node = node_of(Expr::Kind::kList, loc);
    while (!is_op("]")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("]")) break;
      node->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return node;
  }
  if (skip_op("{")) {
    auto node = node_of(Expr::Kind::kDict, loc);
    while (!is_op("}")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("}")) break;
      node->items.push_back(parse_expression(true));
      expect_op(":");
      node->items.push_back(parse_expression(true));
    }
    expect_op("}");
    return node;
  }
  unexpected("an expression");
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".")) {
      const Loc loc = advance().loc;
      if (cur().type == Tok::kName) {
        auto attr = node_of(Expr::Kind::kGetAttr, loc);
        attr->name = advance().text;
        attr->a = std::move(node);
        node = std::move(attr);
      } else if (cur().type == Tok::kInt) {
        auto item = node_of(Expr::Kind::kGetItem, loc);
        item->b = node_of(Expr::Kind::kConst, cur().loc);
        item->b->value = Value::integer(advance().int_value);
        item->a = std::move(node);
        node = std::move(item);
      } else {
        unexpected("an attribute name");
      }
    } else if (is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const Loc loc = advance().loc;  // [
  std::vector<ExprPtr> parts;     // start, stop, step of a slice
  ExprPtr index;
  bool slice = false;
  if (is_op(":")) {
    slice = true;
    parts.push_back(nullptr);
  } else {
    index = parse_expression(true);
    if (is_op(":")) {
      slice = true;
      parts.push_back(std::move(index));
    }
  }
  if (slice) {
    advance();  // :
    parts.push_back(is_op("]") || is_op(":") || is_op(",") ? nullptr : parse_expression(true));
    if (skip_op(":")) {
      parts.push_back(is_op("]") || is_op(",") ? nullptr : parse_expression(true));
    } else {
      parts.push_back(nullptr);
    }
  }
  if (is_op(",")) fail(kUnsupported, cur().loc, "tuple subscripts are not supported");
  expect_op("]");
  if (!slice) {
    auto node = node_of(Expr::Kind::kGetItem, loc);
    node->a = std::move(obj);
    node->b = std::move(index);
    return node;
  }
  auto node = node_of(Expr::Kind::kSlice, loc);
  node->a = std::move(obj);
  node->items = std::move(parts);
  return node;
}

void Parser::parse_call_args(Expr& node) {
  expect_op("(");
  bool comma = false;
  while (!is_op(")")) {
    if (comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) fail(kUnsupported, cur().loc, "*args and **kwargs are not supported");
    if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
      std::string key = advance().text;
      advance();
      node.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!node.kwargs.empty()) fail(kSyntax, cur().loc, "positional argument after a keyword argument");
      node.items.push_back(parse_expression(true));
    }
    comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto node = node_of(Expr::Kind::kCall, cur().loc);
  node->a = std::move(callee);
  parse_call_args(*node);
  return node;
}

std::string Parser::dotted_name() {
  std::string name = expect_name();
  while (is_op(".")) {
    advance();
    name += "." + expect_name();
  }
  return name;
}

// `| f(args) | g` applied to `node` (null inside {% filter %} blocks).
ExprPtr Parser::parse_filter_chain(ExprPtr node) {
  if (node == nullptr) {
    // The first filter of a block has no leading "|".
    node = filter_node(nullptr);
  }
  while (is_op("|")) {
    advance();
    node = filter_node(std::move(node));
  }
  return node;
}

ExprPtr Parser::filter_node(ExprPtr value) {
  const Loc loc = cur().loc;
  auto node = node_of(Expr::Kind::kFilter, loc);
  node->name = dotted_name();
  node->a = std::move(value);
  node->known = has_filter(node->name);
  if (!node->known && !soft_) {
    fail(kUnsupported, loc,
         is_jinja_filter(node->name) ? "filter '" + node->name + "' is not supported" : "no filter named '" + node->name + "'");
  }
  if (is_op("(")) parse_call_args(*node);
  return node;
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      advance();
      node = filter_node(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_test(ExprPtr value) {
  const Loc loc = advance().loc;  // is
  auto node = node_of(Expr::Kind::kTest, loc);
  node->negated = skip_name("not");
  node->name = dotted_name();
  node->a = std::move(value);
  node->known = has_test(node->name);
  if (!node->known && !soft_) {
    fail(kUnsupported, loc,
         is_jinja_test(node->name) ? "test '" + node->name + "' is not supported" : "no test named '" + node->name + "'");
  }
  const Token& t = cur();
  if (is_op("(")) {
    parse_call_args(*node);
  } else if ((t.type == Tok::kName || t.type == Tok::kString || t.type == Tok::kInt || t.type == Tok::kFloat || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail(kSyntax, t.loc, "you cannot chain multiple tests with is");
    node->items.push_back(parse_postfix(parse_primary()));
  }
  return node;
}

}  // namespace mo::tok::jinja
