// Placeholder registration; the real command is being written.
#include "base/error.h"
#include "tools/command.h"

namespace orion::tools {

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "(not built yet)");
  cmd->callback([] { throw_runtime_error("`orion tokenize` is not built yet"); });
}

}  // namespace orion::tools
