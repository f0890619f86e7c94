#pragma once
// `model-optimizer serve`: load the model, size the KV cache from the memory budget, print the start-up
// report, serve the OpenAI API until SIGINT/SIGTERM, then drain and return.
#include "mo/config/commands.h"

namespace mo::serve {

// Returns 0 after a signal-initiated stop. Throws UsageError (bad config, model too big for the
// budget) and mo::Error (unreadable model, port in use) before serving.
int run_server(const config::ServeConfig& cfg);

}  // namespace mo::serve
