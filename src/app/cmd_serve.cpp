#include "cli.h"
#include "mo/config/commands.h"
#include "mo/serve/server.h"

namespace mo::app {
namespace {

class ServeCommand : public Command {
 public:
  const char* name() const override { return "serve"; }
  const char* summary() const override { return "OpenAI-compatible server with continuous batching and a paged KV cache"; }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override { return serve::run_server(cfg_); }

 private:
  config::ServeConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_serve_command() { return std::make_unique<ServeCommand>(); }

}  // namespace mo::app
