// orion chat and orion generate --chat end to end, driven through stdin: a tiny random GPT-2-style
// model in a Hugging Face folder with the shipped small BPE tokenizer plus two ChatML special
// tokens, a tokenizer_config.json with a ChatML template and a generation_config.json.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/io/model_io.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion {
namespace {

using json = nlohmann::json;

constexpr int kImStart = 1257, kImEnd = 1258;  // the special tokens added after the 1257-token vocabulary

const char* kChatMl =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A model folder; eos_ids is generation_config.json's eos_token_id (null: no such file).
std::string chat_model(const json& eos_ids, bool with_template = true) {
  const std::string dir = test::temp_dir() + "/hf";
  ModelConfig c = config_preset("gpt2-tiny");
  c.vocab_size = c.padded_vocab = 1259;
  c.seq_len = 256;
  save_model(random_weights(c, 41), dir, ModelFormat::Safetensors);
  json tok = json::parse(test::read_text(test::data_path("tokenizer/small_gpt2/tokenizer.json")));
  for (auto [id, text] : {std::pair{kImStart, "<|im_start|>"}, std::pair{kImEnd, "<|im_end|>"}})
    tok["added_tokens"].push_back({{"id", id}, {"content", text}, {"special", true}});
  write_file(dir + "/tokenizer.json", tok.dump());
  json cfg = {{"eos_token", "<|im_end|>"}, {"bos_token", nullptr}};
  for (auto [id, text] : {std::pair{kImStart, "<|im_start|>"}, std::pair{kImEnd, "<|im_end|>"}})
    cfg["added_tokens_decoder"][std::to_string(id)] = {{"content", text}, {"special", true}};
  if (with_template) cfg["chat_template"] = kChatMl;
  write_file(dir + "/tokenizer_config.json", cfg.dump());
  if (!eos_ids.is_null()) write_file(dir + "/generation_config.json", json{{"eos_token_id", eos_ids}}.dump());
  return dir;
}

// Runs orion with `input` on stdin (run_orion gives /dev/null).
int run_with_input(const std::string& args, const std::string& input, std::string* out, std::string* err) {
  const std::string dir = test::temp_dir();
  write_file(dir + "/in", input);
  const std::string cmd = std::string(ORION_BINARY) + " " + args + " <" + dir + "/in >" + dir + "/out 2>" + dir + "/err";
  const int rc = std::system(cmd.c_str());
  *out = test::read_text(dir + "/out");
  *err = test::read_text(dir + "/err");
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

// The token ids of each reply, from --verbose's "[reply ids: …]" lines.
std::vector<std::vector<int>> reply_ids(const std::string& err) {
  std::vector<std::vector<int>> replies;
  std::regex line(R"(\[reply ids:([0-9 ]*)\])");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it) {
    std::istringstream ids((*it)[1].str());
    replies.emplace_back(std::istream_iterator<int>(ids), std::istream_iterator<int>());
  }
  return replies;
}

const std::string kFlags = " --temperature 0 --verbose --threads 1";

TEST(CliChat, PromptIsTheRenderedTemplateAndTheTurnStopsAtTheEndOfTurnId) {
  // First run: no generation_config.json, so the reply runs on (unless it hits <|im_end|>).
  std::string dir = chat_model(nullptr), out, err;
  ASSERT_EQ(run_with_input("chat --model " + dir + " --system 'Be kind.' -n 6" + kFlags, "Hello\n", &out, &err), 0) << err;
  EXPECT_NE(err.find("<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n\n"
                     "[end of prompt]"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("from the KV cache]"), std::string::npos) << err;
  auto replies = reply_ids(err);
  ASSERT_EQ(replies.size(), 1u) << err;
  const std::vector<int> first = replies[0];
  // The first id that does not occur before it becomes the end-of-turn id of a second model folder
  // with the same weights: that reply must end just before it.
  size_t k = 1;
  while (k < first.size() && std::find(first.begin(), first.begin() + long(k), first[k]) != first.begin() + long(k)) k++;
  ASSERT_LT(k, first.size()) << "the greedy reply repeats one token: " << err;
  std::string dir2 = chat_model(json(first[k]));
  ASSERT_EQ(run_with_input("chat --model " + dir2 + " --system 'Be kind.' -n 6" + kFlags, "Hello\n", &out, &err), 0) << err;
  replies = reply_ids(err);
  ASSERT_EQ(replies.size(), 1u) << err;
  EXPECT_EQ(replies[0], std::vector<int>(first.begin(), first.begin() + long(k))) << err;
  EXPECT_NE(err.find("| end of turn"), std::string::npos) << err;
}

TEST(CliChat, LaterTurnsKeepTheHistoryAndReuseTheCacheResetForgets) {
  std::string dir = chat_model(json::array({kImEnd})), out, err;
  ASSERT_EQ(run_with_input("chat --model " + dir + " -n 4" + kFlags, "Hello\nHow are you?\n\n/reset\nAgain\n/exit\nNever\n",
                           &out, &err),
            0)
      << err;
  std::vector<size_t> prompts;
  for (size_t p = err.find("[prompt:"); p != std::string::npos; p = err.find("[prompt:", p + 1)) prompts.push_back(p);
  ASSERT_EQ(prompts.size(), 3u) << err;  // the empty line is skipped; nothing after /exit runs
  const std::string turn2 = err.substr(prompts[1], prompts[2] - prompts[1]);
  EXPECT_NE(turn2.find("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"), std::string::npos) << turn2;
  EXPECT_NE(turn2.find("<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"), std::string::npos)
      << turn2;
  // Turn two starts with turn one's prompt, already in the KV cache.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(turn2, m, std::regex(R"(\[prompt: (\d+) tokens, (\d+) from the KV cache\])"))) << turn2;
  EXPECT_GT(std::stoi(m[2]), 8);
  EXPECT_LT(std::stoi(m[2]), std::stoi(m[1]));
  const std::string turn3 = err.substr(prompts[2]);
  EXPECT_NE(err.find("conversation reset"), std::string::npos) << err;
  EXPECT_NE(turn3.find("<|im_start|>user\nAgain<|im_end|>"), std::string::npos) << turn3;
  EXPECT_EQ(turn3.find("Hello"), std::string::npos) << turn3;
  EXPECT_EQ(err.find("Never"), std::string::npos) << err;
}

TEST(CliChat, FolderWithoutChatTemplateSaysToUseGenerate) {
  std::string dir = chat_model(nullptr, false), out, err;
  EXPECT_EQ(run_with_input("chat --model " + dir, "Hi\n", &out, &err), 3) << err;
  EXPECT_NE(err.find("tokenizer_config.json has no chat_template"), std::string::npos) << err;
  EXPECT_NE(err.find("use `orion generate` without --chat"), std::string::npos) << err;
  EXPECT_EQ(test::run_orion("generate --chat --model " + dir + " -n 2", &out, &err), 3);
  EXPECT_NE(err.find("no chat_template"), std::string::npos) << err;
}

TEST(CliChat, TokenizerWithoutTheTemplatesSpecialTokensIsRefused) {
  // The plain GPT-2 files know <|endoftext|> only: <|im_start|> would become ordinary text.
  std::string dir = chat_model(nullptr), out, err;
  const std::string tok = test::data_path("tokenizer/small_gpt2/vocab.json");
  EXPECT_EQ(run_with_input("chat --model " + dir + " --tokenizer " + tok, "Hi\n", &out, &err), 3) << err;
  EXPECT_NE(err.find("the special token '<|im_start|>'"), std::string::npos) << err;  // the first one written
  EXPECT_NE(err.find("cannot encode as one token"), std::string::npos) << err;
}

TEST(CliChat, GenerateChatAppliesTheTemplateToThePrompt) {
  std::string dir = chat_model(json::array({kImEnd})), out, err, plain_out;
  ASSERT_EQ(test::run_orion("generate --chat --model " + dir + " --prompt Hello -n 3 --temperature 0", &out, &err), 0) << err;
  EXPECT_EQ(out.find("Hello"), std::string::npos) << out;  // the reply alone, no echo
  // The prompt the model saw is the template's, its special tokens one id each.
  auto tok = load_tokenizer(dir + "/tokenizer.json");
  const std::vector<int> ids = tok->encode("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImStart), 2);
  EXPECT_NE(err.find(fmt::format("prefill: {} tokens", ids.size())), std::string::npos) << err;
  ASSERT_EQ(test::run_orion("generate --model " + dir + " --prompt Hello -n 3 --temperature 0", &plain_out, &err), 0);
  EXPECT_NE(err.find(fmt::format("prefill: {} tokens", tok->encode("Hello", false).size())), std::string::npos) << err;
}

TEST(CliChat, HelpDescribesTheCommands) {
  std::string out, err;
  ASSERT_EQ(test::run_orion("chat --help", &out, &err), 0);
  EXPECT_NE(out.find("/reset"), std::string::npos) << out;
  EXPECT_NE(out.find("--system"), std::string::npos) << out;
  ASSERT_EQ(test::run_orion("generate --help", &out, &err), 0);
  EXPECT_NE(out.find("--chat"), std::string::npos) << out;
  ASSERT_EQ(test::run_orion("--help", &out, &err), 0);
  EXPECT_NE(out.find("chat"), std::string::npos) << out;
}

}  // namespace
}  // namespace orion
