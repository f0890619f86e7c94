#pragma once
// Runs a parsed chat template. Scoping follows jinja2: {% set %} in a loop body lives for that
// iteration only, {% set %} in an if block is seen after it, namespace attributes are shared.
#include <string>

#include "jinja_ast.h"

namespace mo::tok::jinja {

// `context` holds the template variables; jinja2's globals (range, namespace, raise_exception, ...)
// sit below them. Throws ChatTemplateError.
std::string render(const Body& body, const Dict& context);

}  // namespace mo::tok::jinja
