// orion tokenize: text → token ids (a JSON array on one line), or ids → text with --decode. The
// tool for debugging prompts: it shows exactly what `orion generate` feeds the model.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "base/error.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/command.h"

namespace orion::tools {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string text;
  bool text_given = false;
  bool decode = false;
  bool bos = false;
};

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
}

// "[1, 2, 3]", "1 2 3" or "1,2,3" → ids. Anything else is a usage error naming the bad item.
std::vector<int> parse_ids(const std::string& input) {
  std::string s = input;
  for (char& c : s)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(s);
  std::vector<int> ids;
  std::string item;
  while (in >> item) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX)
      throw_usage_error(fmt::format("'{}' is not a token id", item), "--decode",
                        "give ids as a JSON array [1, 2] or separated by spaces or commas");
    ids.push_back(int(v));
  }
  return ids;
}

std::string ids_to_json(const std::vector<int>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

void run_tokenize(const TokenizeArgs& a) {
  auto tokenizer = load_tokenizer(a.tokenizer);
  const std::string input = a.text_given ? a.text : read_stdin();
  if (a.decode) {
    std::string text = tokenizer->decode(parse_ids(input));
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    std::string line = ids_to_json(tokenizer->encode(input, a.bos)) + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  std::fflush(stdout);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "turn text into token ids, or ids back into text (--decode)");
  cmd->footer(
      "Prints the ids as a JSON array on one line, e.g. [15496, 995]. With --decode, prints the decoded\n"
      "text exactly, with no newline added. Text comes from --text, or from stdin when --text is absent.\n"
      "Tokenizers: GPT-2 byte-level BPE (vocab.json + merges.txt, encoder.json + vocab.bpe, or a folder\n"
      "holding either), a Hugging Face tokenizer.json (BPE: GPT-2, Llama 3, Qwen2, SmolLM2, Llama 2,\n"
      "Mistral; with tokenizer_config.json beside it), llama2.c tokenizer.bin, SentencePiece .model.\n"
      "Special tokens such as <|endoftext|> or <|im_end|> written in the text are encoded as themselves.\n"
      "With --bos a tokenizer.json adds what its post_processor template adds (Llama 3: <|begin_of_text|>).\n"
      "Examples:\n"
      "  orion tokenize --tokenizer gpt2/ --text 'Hello world'\n"
      "  orion tokenize --tokenizer tokenizer.bin --bos < prompt.txt\n"
      "  orion tokenize --tokenizer gpt2/vocab.json --decode --text '[15496, 995]'");
  cmd->add_option("--tokenizer,-t", args->tokenizer,
                  "tokenizer file or folder (tokenizer.bin, tokenizer.json, vocab.json, encoder.json, *.model)")
      ->required();
  cmd->add_option("--text", args->text, "the text to encode (or, with --decode, the ids); default: read stdin");
  cmd->add_flag("--decode,-d", args->decode,
                "decode: read token ids (a JSON array, or separated by spaces or commas) and print the text");
  cmd->add_flag("--bos", args->bos, "prepend the beginning-of-sequence id (llama2.c / SentencePiece: 1; GPT-2 has none)");
  cmd->callback([cmd, args] {
    args->text_given = cmd->count("--text") > 0;
    run_tokenize(*args);
  });
}

}  // namespace orion::tools
