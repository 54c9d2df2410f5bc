// Every pass by name (pass.h): the one list the pipeline, the CLI and the tests look passes up in.
#include <fmt/format.h>

#include "base/error.h"
#include "compiler/pass.h"
#include "compiler/passes/passes.h"

namespace orion::compiler {
namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Pass> (*make)();
};

// Listed in this order by pass_names() and the "known passes" hint; a compile runs them in the
// order of standard_pipeline() (pipeline.cpp). Each pass's summary() is its one-line description.
const Entry kPasses[] = {
    {"dce", make_dce_pass},
    {"fold-identity", make_fold_identity_pass},
    {"fuse-casts", make_fuse_casts_pass},
    {"annotate-sram", make_annotate_sram_pass},
    {"legalize-ane", make_legalize_ane_pass},
    {"validate-ane", make_validate_ane_pass},
};

}  // namespace

std::vector<std::string> pass_names() {
  std::vector<std::string> names;
  for (const Entry& e : kPasses) names.push_back(e.name);
  return names;
}

std::unique_ptr<Pass> make_pass(const std::string& name) {
  for (const Entry& e : kPasses)
    if (name == e.name) {
      std::unique_ptr<Pass> p = e.make();
      ORION_CHECK(name == p->name(), "pass registered as '{}' calls itself '{}'", name, p->name());
      return p;
    }
  throw_usage_error(fmt::format("unknown pass '{}'", name), "pass",
                    fmt::format("known passes: {}", fmt::join(pass_names(), ", ")));
}

}  // namespace orion::compiler
