#include "jinja_parser.h"

#include <set>

#include "jinja_builtins.h"
#include "jinja_parser_impl.h"

namespace mo::tok::jinja {

namespace {

constexpr auto kSyntax = ChatTemplateError::Kind::kSyntax;
constexpr auto kUnsupported = ChatTemplateError::Kind::kUnsupported;

}  // namespace

ExprPtr make_expr(Expr::Kind kind, const Loc& loc) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->loc = loc;
  return e;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kEof: return "end of template";
    case Tok::kText: return "template text";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "'}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "'%}'";
    case Tok::kString: return "string";
    case Tok::kInt:
    case Tok::kFloat: return "number";
    default: return "'" + t.text + "'";
  }
}

// Statements until one of the tags in `ends` (consumed along with its name, which goes to *end).
Body Parser::parse_body(const std::vector<std::string>& ends, std::string* end) {
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::kEof) {
      if (ends.empty()) return body;
      std::string expected;
      for (const std::string& e : ends) expected += (expected.empty() ? "'" : " or '") + e + "'";
      fail(kSyntax, t.loc, "unexpected end of template, expected " + expected);
    }
    if (t.type == Tok::kText) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kText;
      s->loc = t.loc;
      s->text = t.text;
      advance();
      body.push_back(std::move(s));
    } else if (t.type == Tok::kVarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kOutput;
      s->loc = t.loc;
      advance();
      nodes_in_tag_ = 0;
      s->expr = parse_tuple(true, {});
      if (cur().type != Tok::kVarEnd) unexpected("'}}'");
      advance();
      body.push_back(std::move(s));
    } else if (t.type == Tok::kBlockBegin) {
      const Token& name = peek();
      if (name.type != Tok::kName) {
        advance();
        unexpected("a tag name");
      }
      if (std::find(ends.begin(), ends.end(), name.text) != ends.end()) {
        advance();
        *end = advance().text;
        return body;
      }
      body.push_back(parse_statement());
    } else {
      unexpected("template text or a tag");
    }
  }
}

StmtPtr Parser::parse_statement() {
  const Nest nest(*this);
  nodes_in_tag_ = 0;
  advance();  // {%
  const Token tag = advance();
  auto s = std::make_unique<Stmt>();
  s->loc = tag.loc;
  const std::string& n = tag.text;
  if (n == "if") {
    parse_if(*s);
  } else if (n == "for") {
    parse_for(*s);
  } else if (n == "set") {
    parse_set(*s);
  } else if (n == "break" || n == "continue") {
    if (loop_depth_ == 0) fail(kSyntax, tag.loc, "'" + n + "' outside of a loop");
    s->kind = n == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    expect_block_end();
  } else if (n == "filter") {
    s->kind = Stmt::Kind::kFilterBlock;
    s->filter = parse_filter_chain(nullptr);
    expect_block_end();
    s->body = parse_nested({"endfilter"});
    expect_block_end();
  } else if (n == "generation") {
    s->kind = Stmt::Kind::kScope;
    expect_block_end();
    s->body = parse_nested({"endgeneration"});
    expect_block_end();
  } else {
    static const std::set<std::string> kJinjaTags = {"macro", "call", "include",    "import", "from", "extends",
                                                     "block", "with", "autoescape", "do",     "trans"};
    if (kJinjaTags.count(n)) fail(kUnsupported, tag.loc, "the '" + n + "' tag is not supported");
    fail(kSyntax, tag.loc, "unknown tag '" + n + "'");
  }
  return s;
}

// A block body that is not an if branch: jinja2 resolves filters there at compile time.
Body Parser::parse_nested(const std::vector<std::string>& ends) {
  const bool soft = soft_;
  soft_ = false;
  std::string end;
  Body body = parse_body(ends, &end);
  soft_ = soft;
  return body;
}

void Parser::parse_if(Stmt& s) {
  s.kind = Stmt::Kind::kIf;
  const bool soft = soft_;
  soft_ = true;
  std::string end = "elif";
  while (end == "elif") {
    ExprPtr test = parse_tuple(false, {});
    expect_block_end();
    Body body = parse_body({"elif", "else", "endif"}, &end);
    s.branches.emplace_back(std::move(test), std::move(body));
  }
  if (end == "else") {
    expect_block_end();
    s.else_body = parse_body({"endif"}, &end);
  }
  expect_block_end();
  soft_ = soft;
}

void Parser::parse_for(Stmt& s) {
  s.kind = Stmt::Kind::kFor;
  s.targets = parse_targets();
  if (!skip_name("in")) unexpected("'in'");
  s.expr = parse_tuple(false, {"recursive"});
  if (skip_name("if")) s.filter = parse_expression(true);
  if (is_name("recursive")) fail(kUnsupported, cur().loc, "recursive for loops are not supported");
  expect_block_end();
  ++loop_depth_;
  const bool soft = soft_;
  soft_ = false;
  std::string end;
  s.body = parse_body({"endfor", "else"}, &end);
  --loop_depth_;
  if (end == "else") {
    expect_block_end();
    s.else_body = parse_body({"endfor"}, &end);
  }
  soft_ = soft;
  expect_block_end();
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  const bool paren = skip_op("(");
  do {
    if (paren && is_op(")")) break;
    names.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  return names;
}

void Parser::parse_set(Stmt& s) {
  if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "." && peek(2).type == Tok::kName) {
    s.targets.push_back(advance().text);
    advance();
    s.attr = advance().text;
  } else {
    s.targets = parse_targets();
  }
  if (skip_op("=")) {
    s.kind = Stmt::Kind::kSet;
    s.expr = parse_tuple(true, {});
    expect_block_end();
    return;
  }
  if (s.targets.size() != 1) unexpected("'='");
  s.kind = Stmt::Kind::kSetBlock;
  if (skip_op("|")) s.filter = parse_filter_chain(nullptr);
  expect_block_end();
  s.body = parse_nested({"endset"});
  expect_block_end();
}

Body parse_template(const std::string& source) { return Parser(lex(source)).parse_all(); }

}  // namespace mo::tok::jinja
