// `orion tokenize`: ids as a JSON array, --decode, --bos, stdin, and clear errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion {
namespace {

std::string small_vocab() { return test::data_path("tokenizer/small_gpt2/vocab.json"); }
std::string stories(const std::string& f) { return test::data_path("tokenizer/spm_stories/" + f); }

// The ids the small vocabulary's naive reference gives for text (golden.json).
std::vector<int> golden_ids(const std::string& text) {
  for (const auto& g : nlohmann::json::parse(read_text_file(test::data_path("tokenizer/small_gpt2/golden.json"))))
    if (g["text"] == text) return g["ids"].get<std::vector<int>>();
  ADD_FAILURE() << "no golden pair for " << text;
  return {};
}

// Runs orion with stdin read from a file holding `input` (run_orion gives /dev/null).
int run_with_stdin(const std::string& args, const std::string& input, std::string* out) {
  std::string dir = test::temp_dir();
  std::ofstream(dir + "/in", std::ios::binary) << input;
  std::string cmd = std::string(ORION_BINARY) + " " + args + " <" + dir + "/in >" + dir + "/out 2>" + dir + "/err";
  int rc = std::system(cmd.c_str());
  *out = read_text_file(dir + "/out");
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(CliTokenize, EncodesTextAsJsonArray) {
  std::string out, err;
  ASSERT_EQ(test::run_orion("tokenize --tokenizer " + small_vocab() + " --text 'Hello, world! How are you?'", &out, &err), 0)
      << err;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(out.find('\n'), out.size() - 1);  // one line
  EXPECT_EQ(nlohmann::json::parse(out).get<std::vector<int>>(), golden_ids("Hello, world! How are you?"));
}

TEST(CliTokenize, DecodesJsonArrayOrSeparatedIds) {
  std::vector<int> ids = golden_ids("Hello world");
  std::string array = nlohmann::json(ids).dump(), spaced, commas;
  for (size_t i = 0; i < ids.size(); ++i) {
    spaced += (i ? "  " : "") + std::to_string(ids[i]);
    commas += (i ? "," : "") + std::to_string(ids[i]);
  }
  for (const std::string& form : {array, spaced, commas}) {
    std::string out, err;
    ASSERT_EQ(test::run_orion("tokenize -t " + small_vocab() + " --decode --text '" + form + "'", &out, &err), 0) << err;
    EXPECT_EQ(out, "Hello world") << form;
  }
}

TEST(CliTokenize, ReadsStdinAndRoundTrips) {
  const std::string text = "Line one\n\n\tIndented line  two 😀\n";
  std::string ids, back;
  ASSERT_EQ(run_with_stdin("tokenize --tokenizer " + small_vocab(), text, &ids), 0);
  auto tok = load_tokenizer(small_vocab());
  EXPECT_EQ(nlohmann::json::parse(ids).get<std::vector<int>>(), tok->encode(text, false));
  ASSERT_EQ(run_with_stdin("tokenize --tokenizer " + small_vocab() + " --decode", ids, &back), 0);
  EXPECT_EQ(back, text);
}

TEST(CliTokenize, BosWithSentencePieceAndLlama2c) {
  for (const std::string& file : {stories("tokenizer.model"), stories("tokenizer.bin")}) {
    std::string plain, with_bos, err;
    ASSERT_EQ(test::run_orion("tokenize -t " + file + " --text 'Once upon a time'", &plain, &err), 0) << err;
    ASSERT_EQ(test::run_orion("tokenize -t " + file + " --bos --text 'Once upon a time'", &with_bos, &err), 0) << err;
    auto a = nlohmann::json::parse(plain).get<std::vector<int>>();
    auto b = nlohmann::json::parse(with_bos).get<std::vector<int>>();
    ASSERT_EQ(b.size(), a.size() + 1);
    EXPECT_EQ(b[0], 1);
    EXPECT_EQ(std::vector<int>(b.begin() + 1, b.end()), a);
  }
}

TEST(CliTokenize, ErrorsAreOneClearLine) {
  std::string out, err;
  EXPECT_EQ(test::run_orion("tokenize --tokenizer /nonexistent/tok.bin --text hi", &out, &err), 3);
  EXPECT_NE(err.find("/nonexistent/tok.bin"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  EXPECT_EQ(test::run_orion("tokenize -t " + small_vocab() + " --decode --text '[1, two]'", &out, &err), 2);
  EXPECT_NE(err.find("'two' is not a token id"), std::string::npos) << err;

  EXPECT_EQ(test::run_orion("tokenize -t " + small_vocab() + " --decode --text '[999999]'", &out, &err), 3);
  EXPECT_NE(err.find("999999"), std::string::npos) << err;

  EXPECT_EQ(test::run_orion("tokenize --text hi", &out, &err), 2);  // --tokenizer is required
}

TEST(CliTokenize, HelpExplainsTheCommand) {
  std::string out, err;
  ASSERT_EQ(test::run_orion("tokenize --help", &out, &err), 0);
  for (const char* s : {"--tokenizer", "--text", "--decode", "--bos", "JSON array", "stdin", "tokenizer.bin", "vocab.json"})
    EXPECT_NE(out.find(s), std::string::npos) << s;
}

}  // namespace
}  // namespace orion
