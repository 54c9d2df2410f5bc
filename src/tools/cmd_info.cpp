// Placeholder registration; the real command is being written.
#include "base/error.h"
#include "tools/command.h"

namespace orion::tools {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "(not built yet)");
  cmd->callback([] { throw_runtime_error("`orion info` is not built yet"); });
}

}  // namespace orion::tools
