#pragma once
// The chat template parser's state, shared by its statement part (jinja_parser.cpp) and its
// expression part (jinja_parser_expr.cpp).
#include <algorithm>
#include <string>
#include <vector>

#include "jinja_ast.h"
#include "jinja_lexer.h"
#include "jinja_limits.h"

namespace mo::tok::jinja {

std::string describe(const Token& t);  // "'%}'", "end of template", ... for messages
ExprPtr make_expr(Expr::Kind kind, const Loc& loc);

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}
  Body parse_all() {
    std::string end;
    return parse_body({}, &end);
  }

 private:
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(std::size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  const Token& advance() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    fail(ChatTemplateError::Kind::kSyntax, cur().loc, "expected " + expected + ", got " + describe(cur()));
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) unexpected(std::string("'") + op + "'");
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) unexpected("a name");
    return advance().text;
  }
  // One level of brackets, unary operators or tags; kMaxNesting of them fail instead of exhausting the stack.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        fail(ChatTemplateError::Kind::kLimit, p.cur().loc, "the template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Nest() { --p.depth_; }
  };
  ExprPtr node_of(Expr::Kind kind, const Loc& loc) {
    if (++nodes_in_tag_ > kMaxExprNodes)
      fail(ChatTemplateError::Kind::kLimit, loc, "an expression of more than " + std::to_string(kMaxExprNodes) + " parts");
    return make_expr(kind, loc);
  }

  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd) unexpected("'%}'");
    advance();
  }

  // Statements (jinja_parser.cpp). parse_body reads until one of the tags in `ends`, which it
  // consumes along with its name (stored in *end).
  Body parse_body(const std::vector<std::string>& ends, std::string* end);
  StmtPtr parse_statement();
  Body parse_nested(const std::vector<std::string>& ends);
  void parse_if(Stmt& s);
  void parse_for(Stmt& s);
  std::vector<std::string> parse_targets();
  void parse_set(Stmt& s);

  // Expressions, lowest precedence first (jinja_parser_expr.cpp), as in jinja2's parser.py.
  bool tuple_end(const std::vector<std::string>& extra_end) const;
  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parens = false);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(const std::string& op, const Loc& loc, ExprPtr a, ExprPtr b);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr obj);
  void parse_call_args(Expr& node);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter_chain(ExprPtr node);
  ExprPtr filter_node(ExprPtr value);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_test(ExprPtr value);

  std::vector<Token> toks_;
  std::size_t i_ = 0;
  bool soft_ = false;  // inside an if block or inline if: unknown filters and tests fail only when used
  int loop_depth_ = 0;
  int depth_ = 0;         // Nest levels open
  int nodes_in_tag_ = 0;  // expression nodes since the current {{ or {% began
};

}  // namespace mo::tok::jinja
