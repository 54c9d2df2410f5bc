// orion chat: an interactive conversation with an instruction-tuned model. Each line of stdin is a
// user turn; the whole conversation is rendered with the model's chat template (tokenizer_config
// .json) and the reply streams to stdout until an end-of-turn id (generation_config.json's
// eos_token_id, the tokenizer's eos). The KV cache keeps the conversation: a turn feeds only the
// tokens after the longest prefix the cache already holds.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "base/error.h"
#include "base/file.h"
#include "infer/generate.h"
#include "model/io/model_io.h"
#include "tools/chat_prompt.h"
#include "tools/command.h"
#include "tools/options.h"

namespace orion::tools {
namespace {

struct ChatArgs {
  std::string model, tokenizer, system;
  int n = 512;
  int max_seq = 0;
  bool verbose = false;
  SamplerOptions sampler{0.7f, 0.9f, 0, 42};
  ThreadOptions threads;
  DTypeOption dtype;
  KvCacheOption kv_cache;
};

// How many leading ids of `prompt` the KV cache already holds (`in_cache`: the ids fed so far). At
// least the last prompt token is fed again: its logits give the reply's first token.
int reusable_prefix(const std::vector<int>& in_cache, const std::vector<int>& prompt) {
  size_t n = 0;
  while (n < in_cache.size() && n < prompt.size() && in_cache[n] == prompt[n]) n++;
  return int(std::min(n, prompt.size() - 1));
}

class ChatSession {
 public:
  ChatSession(const ChatArgs& a, const Tokenizer& tok, ChatSetup setup, LanguageModel& model)
      : a_(a), tok_(tok), setup_(std::move(setup)), model_(model) {
    go_.max_new_tokens = a.n;
    go_.sampler = a.sampler;
    go_.stop_ids = setup_.stop_ids;
    reset();
  }

  void reset() {
    history_.clear();
    if (!a_.system.empty()) history_.push_back({"system", a_.system});
  }

  // One user turn: render, encode, generate (streamed), remember the reply.
  void turn(const std::string& user) {
    history_.push_back({"user", user});
    const std::string rendered = setup_.chat_template.render(history_);
    const std::vector<int> prompt = encode_chat_prompt(setup_, rendered, tok_);
    if (prompt.empty() || int(prompt.size()) >= model_.max_seq()) {
      std::fprintf(stderr, "orion chat: the conversation is %zu tokens and the context %d; /reset starts again\n",
                   prompt.size(), model_.max_seq());
      history_.pop_back();
      return;
    }
    go_.cached_prompt_tokens = reusable_prefix(in_cache_, prompt);
    if (a_.verbose)
      std::fprintf(stderr, "[prompt: %zu tokens, %d from the KV cache]\n%s\n[end of prompt]\n", prompt.size(),
                   go_.cached_prompt_tokens, rendered.c_str());
    std::string reply;
    std::vector<int> ids;
    int prev = prompt.back();
    const GenerateStats st = generate(model_, prompt, go_, [&](int id) {
      const std::string piece = tok_.decode_token(prev, id);
      reply += piece;
      const std::string shown = printable_piece(piece);
      std::fwrite(shown.data(), 1, shown.size(), stdout);
      std::fflush(stdout);
      prev = id;
      ids.push_back(id);
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
    // The cache now holds the prompt and every reply token fed back; the last sampled token is fed
    // only when generation went on after it (it stopped at an end-of-turn id, which is not fed).
    in_cache_ = prompt;
    in_cache_.insert(in_cache_.end(), ids.begin(), ids.end());
    if (!st.stopped_at_eos && !ids.empty()) in_cache_.pop_back();
    if (a_.verbose) {
      std::string list;
      for (int id : ids) list += " " + std::to_string(id);
      std::fprintf(stderr, "[reply ids:%s]\n", list.c_str());
    }
    std::fprintf(stderr, "prefill: %d tokens (%d reused), %.1f tok/s | decode: %d tokens, %.1f tok/s%s\n", st.prompt_tokens,
                 go_.cached_prompt_tokens, st.prefill_tok_per_s(), st.generated_tokens, st.decode_tok_per_s(),
                 st.stopped_at_eos ? " | end of turn" : " | stopped at --max-new-tokens");
    history_.push_back({"assistant", reply});
  }

 private:
  const ChatArgs& a_;
  const Tokenizer& tok_;
  ChatSetup setup_;
  LanguageModel& model_;
  GenerateOptions go_;
  std::vector<chat::Message> history_;
  std::vector<int> in_cache_;  // the ids whose keys and values the model's KV cache holds, in order
};

void run_chat(const ChatArgs& a) {
  a.threads.apply();
  if (!file_exists(a.model))
    throw_input_error(a.model, "no such file or folder", {}, -1, "pass the path of a model folder (--model)");
  const std::string tok_path = a.tokenizer.empty() ? find_tokenizer_beside(a.model) : a.tokenizer;
  auto tokenizer = load_tokenizer(tok_path);
  ChatSetup setup = load_chat_setup(a.model, *tokenizer);  // before the weights: a missing template fails fast
  if (setup.stop_ids.empty())
    std::fprintf(stderr, "orion chat: warning: the model has no end-of-turn id; each reply runs to --max-new-tokens\n");
  LoadOptions lo;
  lo.dtype = a.dtype.get();
  ModelWeights w = load_model(a.model, lo);
  if (tokenizer->vocab_size() > w.config.vocab_size)
    throw Error(ErrorKind::Usage,
                fmt::format("the tokenizer has {} tokens but the model only {}", tokenizer->vocab_size(), w.config.vocab_size),
                {tok_path, "--tokenizer", -1, "use the tokenizer the model was trained with"});
  Transformer tf(w, a.max_seq, a.kv_cache.get());
  CpuLanguageModel model(tf);
  ChatSession session(a, *tokenizer, std::move(setup), model);

  const bool interactive = isatty(STDIN_FILENO);
  if (interactive) std::fprintf(stderr, "orion chat: type a message; /reset starts over, /exit (or Ctrl-D) ends\n");
  std::string line;
  while (true) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      session.reset();
      std::fprintf(stderr, "orion chat: conversation reset\n");
    } else if (!line.empty()) {
      session.turn(line);
    }
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand(
      "chat",
      "chat with an instruction-tuned model in the terminal.\n"
      "Each line of stdin is your turn; the conversation is rendered with the model's chat template\n"
      "(tokenizer_config.json) and the reply streams until the model ends its turn\n"
      "(generation_config.json's eos_token_id). The KV cache keeps the conversation between turns.\n"
      "Commands: /reset forgets the conversation (keeps --system), /exit or end of input quits.\n"
      "Example: orion chat --model Qwen2.5-0.5B-Instruct --system 'Be brief.'");
  cmd->add_option("--model,-m", a->model, "Hugging Face model folder with tokenizer_config.json")->required();
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer file (default: the one in the model folder)");
  cmd->add_option("--system", a->system, "system message that starts the conversation");
  cmd->add_option("-n,--max-new-tokens", a->n, "most tokens in one reply")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-seq", a->max_seq, "context length to allocate (0 = the model's)")->check(CLI::NonNegativeNumber);
  a->kv_cache.add(cmd);
  cmd->add_flag("--verbose", a->verbose,
                "print each turn's rendered prompt, its token count and how many came from the KV cache, and the reply's "
                "token ids (stderr)");
  add_sampler_options(cmd, a->sampler);
  a->threads.add(cmd);
  a->dtype.add(cmd, "convert the weights to this precision at load (default: as stored)");
  cmd->callback([a] { run_chat(*a); });
}

}  // namespace orion::tools
