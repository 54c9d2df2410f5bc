// `orion serve` as a process: it prints its address, answers, and on SIGTERM stops and exits 0; the
// standard-library Python client of the docs (docs/examples/stream_chat.py) streams a chat from it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "model/io/model_io.h"
#include "serve_fixture.h"

namespace orion::test {
namespace {

// Starts `orion serve` on a free port; returns its pid and port (−1 when it did not come up in 20 s).
std::pair<int, int> start_server(const std::string& dir, const std::string& extra) {
  const std::string log = dir + "/serve.log";
  const int pid = fork();
  if (pid == 0) {
    const std::string cmd = std::string("exec ") + ORION_BINARY + " serve --model " + dir + "/m.bin --tokenizer " +
                            data_path("tokenizer/spm_stories/tokenizer.bin") + " --port 0 --threads 1 " + extra +
                            " 2>" + log;
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::regex address(R"(http://127\.0\.0\.1:(\d+)/)");
  for (int i = 0; i < 200; i++) {
    std::smatch m;
    const std::string text = read_text(log);
    if (std::regex_search(text, m, address)) return {pid, std::stoi(m[1])};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return {pid, -1};
}

int stop_server(int pid) {
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CliServe, AnswersThenStopsOnSigtermWithExitCodeZero) {
  const std::string dir = temp_dir();
  save_model(random_weights(config_preset("stories260k"), 8), dir + "/m.bin", ModelFormat::Llama2c);
  auto [pid, port] = start_server(dir, "--api-key k1 --parallel 2");
  ASSERT_GT(port, 0) << read_text(dir + "/serve.log");
  httplib::Client cli("127.0.0.1", port);
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(cli.Get("/v1/models")->status, 401);
  auto models = cli.Get("/v1/models", {{"Authorization", "Bearer k1"}});
  EXPECT_EQ(models->status, 200);
  // A request still streaming when the signal comes: the server ends it and exits 0.
  std::thread streaming([port = port] {  // a copy: clang 14 captures no structured binding
    httplib::Client c("127.0.0.1", port);
    c.Post("/v1/completions", {{"Authorization", "Bearer k1"}},
           R"({"model": "base", "prompt": "Once", "max_tokens": 400, "stream": true})", "application/json");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(stop_server(pid), 0) << read_text(dir + "/serve.log");
  streaming.join();
  EXPECT_NE(read_text(dir + "/serve.log").find("stopped"), std::string::npos);
}

TEST(CliServe, ThePythonStandardLibraryClientOfTheDocsStreamsAChat) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string dir = temp_dir();
  save_model(random_weights(config_preset("stories260k"), 9), dir + "/m.bin", ModelFormat::Llama2c);
  auto [pid, port] = start_server(dir, "");
  ASSERT_GT(port, 0) << read_text(dir + "/serve.log");
  const std::string cmd = "/usr/bin/python3 " + std::filesystem::path(ORION_TEST_DATA).parent_path().parent_path().string() +
                          "/docs/examples/stream_chat.py --port " + std::to_string(port) +
                          " --max-tokens 6 'Once upon a time' 2>" + dir + "/py.err";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << read_text(dir + "/py.err");
  }
  EXPECT_EQ(stop_server(pid), 0);
  const std::string err = read_text(dir + "/py.err");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(\[(\d+) chunks\])"))) << err;
  EXPECT_GE(std::stoi(m[1]), 2) << "the role chunk and at least one piece of text";
}

// Control bytes (raw-byte tokens) that `orion generate` leaves out of what it prints.
std::string printable(std::string s) {
  std::erase_if(s, [](char ch) { return uint8_t(ch) < 0x20 && ch != '\n' && ch != '\t'; });
  return s;
}

// `flags` go to both the server and generate (e.g. --kv-cache f16: each slot's cache rounds as the
// Transformer's does).
void check_chat_equals_generate_chat(const std::string& flags) {
  const std::string dir = temp_dir();
  save_model(random_weights(config_preset("stories260k"), 10), dir + "/m.bin", ModelFormat::Llama2c);
  std::ofstream(dir + "/tokenizer_config.json")
      << nlohmann::json{{"chat_template",
                         "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}assistant:{% endif %}"}}
             .dump();
  auto [pid, port] = start_server(dir, flags);
  ASSERT_GT(port, 0) << read_text(dir + "/serve.log");
  httplib::Client cli("127.0.0.1", port);
  const nlohmann::json body = {{"model", "base"}, {"messages", {{{"role", "user"}, {"content", "Tell me"}}}},
                               {"max_tokens", 10}, {"temperature", 0}};
  auto res = cli.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_EQ(stop_server(pid), 0);
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
  const nlohmann::json r = nlohmann::json::parse(res->body);
  const std::string reply = r["choices"][0]["message"]["content"];
  // The prompt is the template's rendering, encoded without BOS (the template would write one).
  const auto tok = load_tokenizer(data_path("tokenizer/spm_stories/tokenizer.bin"));
  EXPECT_EQ(r["usage"]["prompt_tokens"], tok->encode("user: Tell me\nassistant:", false).size());
  std::string out, err;
  ASSERT_EQ(run_orion("generate --chat --model " + dir + "/m.bin --tokenizer " +
                          data_path("tokenizer/spm_stories/tokenizer.bin") + " -p 'Tell me' -n 10 --temperature 0 " + flags,
                      &out, &err),
            0)
      << err;
  ASSERT_FALSE(out.empty());
  out.pop_back();  // generate ends the reply with a newline
  EXPECT_EQ(printable(reply), as_json_text(out)) << flags;
}

TEST(CliServe, ChatUsesTheModelsTemplateAsGenerateChatDoes) { check_chat_equals_generate_chat(""); }
TEST(CliServe, F16KvCacheChatEqualsGenerateChatWithIt) { check_chat_equals_generate_chat("--kv-cache f16"); }

// --backend anesim: the blocks run as ANE programs on anesim; a greedy completion is the text
// `orion generate --backend anesim` prints, and /health counts the programs compiled.
TEST(CliServe, AnesimCompletionEqualsGenerateOnAnesim) {
  const std::string dir = temp_dir();
  save_model(random_weights(fixture_config(/*anesim=*/true), 11), dir + "/m.bin", ModelFormat::Llama2c);
  auto [pid, port] = start_server(dir, "--backend anesim --parallel 2");
  ASSERT_GT(port, 0) << read_text(dir + "/serve.log");
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(300);
  const nlohmann::json body = {{"model", "base"}, {"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};
  auto res = cli.Post("/v1/completions", body.dump(), "application/json");
  auto health = cli.Get("/health");
  EXPECT_EQ(stop_server(pid), 0);
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer") << read_text(dir + "/serve.log");
  ASSERT_TRUE(health);
  EXPECT_GT(nlohmann::json::parse(health->body)["compiles"].get<int>(), 0);
  const std::string reply = nlohmann::json::parse(res->body)["choices"][0]["text"];
  std::string out, err;
  ASSERT_EQ(run_orion("generate --backend anesim --no-echo --model " + dir + "/m.bin --tokenizer " +
                          data_path("tokenizer/spm_stories/tokenizer.bin") + " -p 'Once upon a time' -n 8 --temperature 0",
                      &out, &err),
            0)
      << err;
  ASSERT_FALSE(out.empty());
  out.pop_back();  // generate ends the text with a newline
  EXPECT_FALSE(printable(reply).empty());
  EXPECT_EQ(printable(reply), as_json_text(out));
}

}  // namespace
}  // namespace orion::test
