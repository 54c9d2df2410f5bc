// orion demo: the first thing a new user runs — Orion end to end on a fresh machine, no files, no
// network: learn a tokenizer from the built-in stories, train a small Llama on them (the loss falls
// on screen), then tell a story with the trained model and report the generation speed.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "base/timer.h"
#include "infer/generate.h"
#include "model/io/model_io.h"
#include "model/tokenizer/tokenizer.h"
#include "model/transformer.h"
#include "runtime/cpu/kernels.h"
#include "tools/command.h"
#include "tools/train_progress.h"
#include "tools/options.h"
#include "train/loop/trainer.h"

namespace orion::tools {
namespace {
namespace fs = std::filesystem;

struct DemoArgs {
  std::string config = "stories260k";
  // Measured on an idle 2-core VM (1 thread): 500 steps in about 68 s, validation loss 6.24 → 0.98.
  int64_t steps = 500;
  int batch = 8, seq = 128, stories = 4000, n = 200;
  float lr = 5e-3f, temperature = 0;
  std::string out, prompt = "Once upon a time";
  ThreadOptions threads;
};

// A fresh folder under the system temp dir, removed when the demo ends (unless --out was given).
struct RunFolder {
  std::string path;
  bool keep = false;
  explicit RunFolder(const std::string& out) : keep(!out.empty()) {
    if (keep) {
      path = out;
      return;
    }
    std::string tmpl = (fs::temp_directory_path() / "orion-demo-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw_runtime_error("cannot create a temporary folder", tmpl, "pass --out DIR");
    path = tmpl;
  }
  ~RunFolder() {
    std::error_code ec;
    if (!keep) fs::remove_all(path, ec);
  }
};

train::TrainOptions demo_training(const DemoArgs& a, const std::string& dir) {
  train::TrainOptions o;
  o.config = a.config;
  o.data = fmt::format("builtin:{}", a.stories);
  o.vocab = 512;
  o.batch = a.batch, o.seq = a.seq, o.steps = a.steps, o.lr = a.lr;
  o.eval_every = int(std::max<int64_t>(1, a.steps / 5));
  o.eval_batches = 8;
  o.log_every = int(std::max<int64_t>(1, a.steps / 15));
  o.checkpoint_every = 0;  // one checkpoint at the end
  o.keep = 1;
  o.sample_tokens = 0;  // the demo tells its own story below
  o.out = dir;
  o.on_progress = progress_printer(ProgressStyle::Train);  // the progress lines on stderr
  return o;
}

void tell_story(const DemoArgs& a, const std::string& model_path, const std::string& tokenizer_path) {
  ModelWeights w = load_model(model_path);
  auto tok = load_tokenizer(tokenizer_path);
  Transformer tf(w);
  GenerateOptions go;
  go.max_new_tokens = a.n;
  go.sampler.temperature = a.temperature;  // 0: greedy, the same story on every machine
  for (int id : {tok->eos_id(), tok->bos_id()})
    if (id >= 0) go.stop_ids.push_back(id);
  std::vector<int> prompt = tok->encode(a.prompt, true);
  std::printf("\n%s", a.prompt.c_str());
  int prev = prompt.back();
  GenerateStats st = generate(tf, prompt, go, [&](int id) {
    std::fputs(tok->decode_token(prev, id).c_str(), stdout);
    std::fflush(stdout);
    prev = id;
  });
  std::printf("\n\n");
  std::printf("generation: %d prompt tokens, prefill %.0f tok/s; %d tokens, decode %.0f tok/s%s\n", st.prompt_tokens,
              st.prefill_tok_per_s(), st.generated_tokens, st.decode_tok_per_s(),
              st.stopped_at_eos ? " (stopped at the end of the story)" : "");
}

void run_demo(const DemoArgs& a) {
  a.threads.apply();
  Timer total;
  RunFolder dir(a.out);
  std::printf("Orion demo — train a tiny story model from nothing on the CPU (%s, %d thread%s), then let it write.\n",
              cpu::isa_name(cpu::active_isa()), cpu::num_threads(), cpu::num_threads() == 1 ? "" : "s");
  double load = 0;
  if (getloadavg(&load, 1) == 1 && cpu::num_threads() > 1 && load > std::thread::hardware_concurrency())
    std::printf("note: the machine is busy (load %.1f on %u cores); if training crawls, try --threads 1\n", load,
                std::thread::hardware_concurrency());
  std::printf("1. tokenizer: BPE with 512 tokens learned from %d built-in stories\n", a.stories);
  std::printf("2. training:  %s on those stories, %lld steps of %d×%d tokens (progress on stderr)\n", a.config.c_str(),
              (long long)a.steps, a.batch, a.seq);
  std::fflush(stdout);
  train::Trainer trainer(demo_training(a, dir.path));
  const double h1 = trainer.unigram_entropy();
  train::TrainResult r = trainer.run();
  std::printf("   loss %.3f → %.3f, validation loss %.3f nats/token in %.1f s (%.0f tok/s)\n", r.first_loss, r.last_loss,
              r.val_loss, r.seconds, r.tokens_per_second);
  std::printf("   for scale: uniform guessing is %.3f, word frequencies alone (unigram entropy) %.3f nats/token\n",
              std::log(512.0), h1);
  std::printf("3. story:     greedy continuation of \"%s\" by the trained model\n", a.prompt.c_str());
  tell_story(a, r.model, r.tokenizer);
  std::printf("demo finished in %.1f s.%s\n", total.seconds(),
              dir.keep ? fmt::format(" Files in {}: tokenizer.bin, model.bin, checkpoints/, metrics.jsonl", dir.path).c_str()
                       : " (files removed; keep them with --out DIR)");
  if (dir.keep)
    std::printf("next: orion generate --model %s --tokenizer %s --prompt \"Once upon a time\"\n", r.model.c_str(),
                r.tokenizer.c_str());
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "run Orion end to end with no files and no network: learn a 512-token BPE tokenizer from the built-in\n"
      "stories, train a small Llama on them (about a minute on 2 cores), and generate a story with it");
  cmd->add_option("--steps", a->steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1000000)));
  cmd->add_option("--config", a->config, "model: a preset or a JSON file (vocabulary set to 512)")->capture_default_str();
  cmd->add_option("--batch,-b", a->batch, "sequences per step")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seq", a->seq, "tokens per sequence")->capture_default_str()->check(CLI::Range(8, 4096));
  cmd->add_option("--lr", a->lr, "peak learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--stories", a->stories, "built-in stories to learn from")
      ->capture_default_str()
      ->check(CLI::Range(50, 1000000));
  cmd->add_option("-n", a->n, "tokens to generate")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--prompt", a->prompt, "start of the story")->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "sampling temperature (0 = greedy)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 2.0f));
  cmd->add_option("--out,-o", a->out, "keep the run (tokenizer, model, checkpoint, metrics) in this folder");
  // One thread by default: the demo's model has 0.3M parameters, too little work per step to
  // share — on an idle 2-core VM one thread ran 500 steps at 135 ms/step, two at 320 ms/step
  // (the same losses bit for bit). --threads overrides it for larger --config choices.
  a->threads.threads = 1;
  a->threads.add(cmd);
  cmd->callback([a] { run_demo(*a); });
}

}  // namespace orion::tools
