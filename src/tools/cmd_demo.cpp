// orion demo: the first thing a new user runs. Until training lands it generates from a small
// random-weight Stories model and reports speed — no files, no network.
#include <cstdio>

#include "base/timer.h"
#include "infer/generate.h"
#include "infer/speed.h"
#include "model/transformer.h"
#include "runtime/cpu/kernels.h"
#include "tools/command.h"
#include "tools/options.h"

namespace orion::tools {
namespace {

struct DemoArgs {
  std::string config = "stories15m";
  int n = 64;
  ThreadOptions threads;
};

void run_demo(const DemoArgs& a) {
  a.threads.apply();
  std::printf("Orion demo — CPU backend (%s, %d threads)\n", cpu::isa_name(cpu::active_isa()), cpu::num_threads());
  ModelConfig c = config_preset(a.config);
  std::printf("model: %s, random weights (training arrives with the training work; this shows the inference path)\n",
              c.describe().c_str());
  ModelWeights w = random_weights(c, 7);
  Transformer tf(w);
  GenerateOptions go;
  go.max_new_tokens = a.n;
  go.sampler.temperature = 0;  // greedy: the same ids on every machine and thread count
  std::vector<int> prompt = {1, 400, 401, 402, 403, 404, 405, 406};
  std::printf("greedy token ids after an 8-token prompt:\n ");
  GenerateStats st = generate(tf, prompt, go, [](int id) {
    std::printf(" %d", id);
    std::fflush(stdout);
  });
  std::printf("\nprefill %.0f tok/s, decode %.1f tok/s\n", st.prefill_tok_per_s(), st.decode_tok_per_s());
  std::printf("next: `orion bench generate --config stories110m`, `orion generate --model M.bin --tokenizer T.bin`\n");
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand("demo", "run Orion end to end on built-in defaults (no files, no network)");
  cmd->add_option("--config", a->config, "model config")->capture_default_str()->check(CLI::IsMember(config_preset_names()));
  cmd->add_option("-n", a->n, "tokens to generate")->capture_default_str()->check(CLI::Range(1, 4096));
  a->threads.add(cmd);
  cmd->callback([a] { run_demo(*a); });
}

}  // namespace orion::tools
