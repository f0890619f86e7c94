#pragma once
// The quant library's typed options from the quantize command's YAML keys and flags.
#include "mo/config/commands.h"
#include "mo/quant/options.h"

namespace mo::app {

// Throws UsageError naming the key when a value has no meaning (the schema already checks choices).
quant::QuantizeOptions quantize_options(const config::QuantizeConfig& c);

}  // namespace mo::app
