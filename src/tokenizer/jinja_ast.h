#pragma once
// Syntax tree of a parsed chat template: expressions and statements as plain tagged structs.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja_value.h"

namespace mo::tok::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kConst,     // value
    kName,      // name
    kList,      // items
    kTuple,     // items
    kDict,      // items: key, value, key, value, ...
    kGetAttr,   // a.name
    kGetItem,   // a[b]
    kSlice,     // a[items[0]:items[1]:items[2]], each may be null
    kCall,      // a(items..., kwargs...)
    kFilter,    // a | name(items..., kwargs...); a is null inside {% filter %} / {% set x | f %}
    kTest,      // a is [not] name(items..., kwargs...)
    kNeg,       // -a
    kPos,       // +a
    kNot,       // not a
    kBinary,    // a name b, name in + - * / // % **
    kConcat,    // items joined with ~
    kCompare,   // items[0] ops[0] items[1] ops[1] items[2] ...
    kAnd,       // a and b
    kOr,        // a or b
    kCondExpr,  // a if b else c (c may be null)
  };
  Kind kind = Kind::kConst;
  Loc loc;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: "is not"
  bool known = true;     // kFilter / kTest: the name exists; unknown names fail when evaluated
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (test, body); else_body
    kFor,          // for targets in expr [if filter]; body; else_body
    kSet,          // set targets = expr, or set targets[0].attr = expr
    kSetBlock,     // set targets[0] [| filter] %}body{% endset
    kFilterBlock,  // filter filter %}body{% endfilter
    kScope,        // {% generation %}body{% endgeneration %}: rendered as is
    kBreak,
    kContinue,
  };
  Kind kind = Kind::kText;
  Loc loc;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;  // kFor: the `if` condition; kSetBlock / kFilterBlock: the filter chain
  std::vector<std::string> targets;
  std::string attr;  // kSet on a namespace: `ns.attr`
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
};

}  // namespace mo::tok::jinja
