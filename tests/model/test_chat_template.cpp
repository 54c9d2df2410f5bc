// ChatTemplate: where a model folder keeps its chat template and special tokens, rendering a
// conversation, and the end-of-turn ids of generation_config.json.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion::chat {
namespace {

using json = nlohmann::json;

const char* kTemplate = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}"
                        "{% if add_generation_prompt %}[assistant]{% endif %}";

std::string folder(const json& config) {
  const std::string dir = test::temp_dir();
  std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  return dir;
}

TEST(ChatTemplate, RendersAConversationWithTheFoldersTokens) {
  // Older files write special tokens as {"content": …} objects.
  const ChatTemplate t = ChatTemplate::from_model_folder(
      folder({{"chat_template", kTemplate}, {"bos_token", {{"content", "<s>"}}}, {"eos_token", "</s>"}}));
  EXPECT_EQ(t.bos_token(), "<s>");
  EXPECT_EQ(t.render({{"system", "S"}, {"user", "hi"}}), "<s>[system]S</s>[user]hi</s>[assistant]");
  RenderOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(t.render({{"user", "hi"}}, no_prompt), "<s>[user]hi</s>");
}

TEST(ChatTemplate, ListOfNamedTemplatesPicksDefault) {
  const json list = json::array({{{"name", "tool_use"}, {"template", "tools"}}, {{"name", "default"}, {"template", "plain"}}});
  EXPECT_EQ(ChatTemplate::from_model_folder(folder({{"chat_template", list}})).render({}), "plain");
  const json no_default = json::array({{{"name", "tool_use"}, {"template", "tools"}}});
  EXPECT_THROW(ChatTemplate::from_model_folder(folder({{"chat_template", no_default}})), Error);
}

TEST(ChatTemplate, ChatTemplateJinjaBesideTheConfig) {
  const std::string dir = folder({{"eos_token", "</s>"}});
  std::ofstream(dir + "/chat_template.jinja") << "{{ messages[0].content }}{{ eos_token }}\n";
  EXPECT_TRUE(ChatTemplate::folder_has_template(dir));
  EXPECT_EQ(ChatTemplate::from_model_folder(dir).render({{"user", "x"}}), "x</s>");
}

TEST(ChatTemplate, MissingTemplateSaysToGenerateWithoutChat) {
  const std::string dir = folder({{"eos_token", "</s>"}});
  EXPECT_FALSE(ChatTemplate::folder_has_template(dir));
  try {
    ChatTemplate::from_model_folder(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("has no chat_template"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("without --chat"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, StrftimeNowUsesTheInjectedDate) {
  const ChatTemplate t("{{ strftime_now('%d %b %Y') }}", "t");
  RenderOptions o;
  o.now = std::tm{};
  o.now->tm_year = 124, o.now->tm_mon = 6, o.now->tm_mday = 26;
  EXPECT_EQ(t.render({}, o), "26 Jul 2024");
  // Extra variables reach the template (Qwen3's enable_thinking).
  o.extra.emplace_back("enable_thinking", false);
  EXPECT_EQ(ChatTemplate("{{ enable_thinking }} {{ tools }}", "t").render({}, o), "False None");
}

TEST(ChatTemplate, TemplateErrorsNameTheConfigFile) {
  const std::string dir = folder({{"chat_template", "line one\n{{ messages | nosuch }}"}});
  try {
    ChatTemplate::from_model_folder(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: chat_template: line 2, column 15: no filter named 'nosuch'"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplate, EndOfTurnIdsFromGenerationConfigAndEos) {
  auto tok = load_tokenizer(test::data_path("tokenizer/small_gpt2/tokenizer.json"));  // eos <|endoftext|> = 1256
  const std::string dir = test::temp_dir();
  EXPECT_EQ(end_of_turn_ids(dir, *tok, ""), std::vector<int>({1256}));
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": [7, 1256, 9]})";
  EXPECT_EQ(end_of_turn_ids(dir, *tok, "<|endoftext|>"), std::vector<int>({7, 1256, 9}));
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": 5})";
  EXPECT_EQ(end_of_turn_ids(dir, *tok, ""), std::vector<int>({5, 1256}));
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": "x"})";
  EXPECT_THROW(end_of_turn_ids(dir, *tok, ""), Error);
}

}  // namespace
}  // namespace orion::chat
