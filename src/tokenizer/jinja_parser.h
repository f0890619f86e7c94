#pragma once
// Builds the syntax tree of a chat template from its tokens, with jinja2's grammar and operator
// precedence. Unknown tags fail here; unknown filters and tests fail here too unless they sit in an
// if block or inline if, where jinja2 waits until they are evaluated.
#include <string>

#include "jinja_ast.h"

namespace mo::tok::jinja {

// Throws ChatTemplateError (kSyntax or kUnsupported) with the line and column of the problem.
Body parse_template(const std::string& source);

}  // namespace mo::tok::jinja
