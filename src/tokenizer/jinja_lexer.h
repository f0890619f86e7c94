#pragma once
// Splits a template into text and tag tokens the way jinja2's lexer does with trim_blocks and
// lstrip_blocks on: newlines normalized to "\n", one trailing newline dropped, "-" and "+" whitespace
// control, comments removed, raw blocks kept as text.
#include <cstdint>
#include <string>
#include <vector>

#include "jinja_value.h"

namespace mo::tok::jinja {

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // text, name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  Loc loc;
};

// Throws ChatTemplateError (kSyntax) for an unterminated tag, comment or string and stray brackets.
std::vector<Token> lex(const std::string& source);

}  // namespace mo::tok::jinja
