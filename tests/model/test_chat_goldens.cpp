// Orion's Jinja engine against python3-jinja2: every case of tests/testdata/chat/goldens.json (the
// real chat templates of Qwen2.5, Qwen3, SmolLM2, Llama 3.2 and Mistral rendered the way
// transformers does, by tests/model/chat_goldens/render_goldens.py) renders byte for byte the same,
// or raises the same raise_exception message.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/chat/chat_template.h"
#include "model/chat/jinja.h"
#include "support.h"

namespace orion {
namespace {

nlohmann::ordered_json goldens() {
  std::ifstream f(test::data_path("chat/goldens.json"));
  return nlohmann::ordered_json::parse(f);
}

// The date the goldens were rendered with (render_goldens.py's FIXED_NOW).
std::tm fixed_now() {
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 8;
  t.tm_mday = 26;
  t.tm_hour = 14;
  t.tm_min = 30;
  return t;
}

TEST(ChatGoldens, EveryCaseRendersByteForByteAsJinja2) {
  const nlohmann::ordered_json g = goldens();
  ASSERT_GE(g["cases"].size(), 90u);
  std::map<std::string, std::unique_ptr<jinja::Template>> templates;
  int outputs = 0, errors = 0;
  for (const auto& c : g["cases"]) {
    const std::string file = c["template"];
    if (!templates.count(file))
      templates[file] = std::make_unique<jinja::Template>(test::read_text(test::data_path("chat/templates/" + file)), file);
    jinja::Dict vars = jinja::Value::from_json(c["variables"]).as_dict();
    vars.emplace_back("strftime_now", chat::strftime_now_function(fixed_now()));
    SCOPED_TRACE(file + " / " + c["name"].get<std::string>());
    if (c.contains("output")) {
      EXPECT_EQ(templates[file]->render(vars), c["output"].get<std::string>());
      outputs++;
    } else {
      try {
        templates[file]->render(vars);
        ADD_FAILURE() << "expected the template to raise: " << c["error"];
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(file + ": line 1, column"), std::string::npos) << e.what();
      }
      errors++;
    }
  }
  EXPECT_GT(outputs, 80);
  EXPECT_GT(errors, 0);
}

TEST(ChatGoldens, SnippetsRenderAsJinja2) {
  // One engine feature each: loop scoping, precedence, slicing, float repr, tojson, whitespace.
  const nlohmann::ordered_json g = goldens();
  ASSERT_GE(g["snippets"].size(), 20u);
  for (const auto& c : g["snippets"]) {
    const std::string source = c["source"];
    SCOPED_TRACE(source);
    const jinja::Template t(source, "snippet");
    EXPECT_EQ(t.render(jinja::Value::from_json(c["variables"]).as_dict()), c["output"].get<std::string>());
  }
}

TEST(ChatGoldens, CommittedGoldensAreWhatTheScriptRendersNow) {
  // The goldens are jinja2's rendering of the committed templates: re-rendered here, they match.
  if (std::system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with jinja2 is missing (Debian package python3-jinja2)";
  const std::string out = test::temp_dir() + "/goldens.json";
  const std::string script = test::data_path("../model/chat_goldens/render_goldens.py");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + out + " 2>/dev/null").c_str()), 0);
  EXPECT_TRUE(test::read_text(out) == test::read_text(test::data_path("chat/goldens.json")))
      << "the goldens are stale: run /usr/bin/python3 tests/model/chat_goldens/render_goldens.py";
}

}  // namespace
}  // namespace orion
