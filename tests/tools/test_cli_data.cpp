// `orion data …` and `orion tokenizer train`: the whole path a user takes — train a tokenizer on the
// built-in corpus, prepare shards with it, inspect them, fetch a packed data set from a local server —
// plus help texts and one-line errors with the right exit codes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../data/loopback_http.h"
#include "base/file.h"
#include "data/token_files.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion {
namespace {
namespace fs = std::filesystem;

TEST(CliData, HelpListsTheSubcommands) {
  std::string out;
  ASSERT_EQ(test::run_orion("data --help", &out), 0);
  for (const char* s : {"prepare", "fetch", "info"}) EXPECT_NE(out.find(s), std::string::npos) << s;
  ASSERT_EQ(test::run_orion("data prepare --help", &out), 0);
  EXPECT_NE(out.find("--val-fraction"), std::string::npos);
  EXPECT_NE(out.find("builtin"), std::string::npos);
  ASSERT_EQ(test::run_orion("tokenizer train --help", &out), 0);
  EXPECT_NE(out.find("--vocab"), std::string::npos);
  ASSERT_EQ(test::run_orion("data fetch --help", &out), 0);
  EXPECT_NE(out.find("resume"), std::string::npos);
}

TEST(CliData, TrainTokenizerPrepareAndInspect) {
  const std::string dir = test::temp_dir();
  std::string out, err;
  ASSERT_EQ(test::run_orion("tokenizer train --vocab 400 --in builtin:400 --out " + dir + "/tok --format both", &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("400 tokens (llama2c)"), std::string::npos) << out;
  EXPECT_NE(out.find("400 tokens (gpt2-bpe)"), std::string::npos) << out;
  EXPECT_EQ(load_tokenizer(dir + "/tok/tokenizer.json")->vocab_size(), 400);

  ASSERT_EQ(test::run_orion("data prepare --tokenizer " + dir + "/tok/tokenizer.bin --in builtin:300 --out " + dir +
                                "/data --val-fraction 0.1 --threads 2",
                            &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("train 270 docs"), std::string::npos) << out;
  EXPECT_NE(out.find("val 30 docs"), std::string::npos) << out;
  EXPECT_NE(err.find("docs/s"), std::string::npos) << err;  // the progress line
  EXPECT_NE(err.find("MB/s"), std::string::npos) << err;
  ASSERT_EQ(test::run_orion("data info " + dir + "/data/val_000.bin --vocab 400", &out, &err), 0) << err;
  EXPECT_NE(out.find("llama2c"), std::string::npos);
  EXPECT_NE(out.find("30 sequences"), std::string::npos) << out;
  // The same data checked against a too-small vocabulary is refused, naming the file.
  EXPECT_EQ(test::run_orion("data info " + dir + "/data/val_000.bin --vocab 100", &out, &err), 3);
  EXPECT_NE(err.find("val_000.bin"), std::string::npos) << err;
}

TEST(CliData, ErrorsAreOneLineWithExitCodes) {
  const std::string dir = test::temp_dir();
  std::string out, err;
  std::ofstream(dir + "/bad.json") << "[{\"story\": \"ok\"}, {\"text\": 1}]";
  EXPECT_EQ(test::run_orion("data prepare --tokenizer " + test::data_path("tokenizer/spm_stories/tokenizer.bin") + " --in " +
                                dir + "/bad.json --out " + dir + "/o --no-progress",
                            &out, &err),
            3);
  EXPECT_NE(err.find("bad.json"), std::string::npos) << err;
  EXPECT_NE(err.find("\"story\""), std::string::npos) << err;
  EXPECT_EQ(test::run_orion("tokenizer train --vocab 100 --in builtin --out " + dir, &out, &err), 2);  // below 256
  EXPECT_EQ(test::run_orion("tokenizer train --vocab 300 --in builtin:5:x --out " + dir, &out, &err), 2);
  EXPECT_EQ(test::run_orion("data fetch tinystories --out " + dir + " --url ftp://127.0.0.1/x", &out, &err), 2);
}

TEST(CliData, FetchDownloadsAndUnpacksFromLoopback) {
  // A TinyStories-like archive: data00.json inside a .tar.gz, served on 127.0.0.1.
  const std::string src = test::temp_dir(), dir = test::temp_dir();
  std::ofstream(src + "/data00.json") << R"([{"story": "Tom had a red ball."}, {"story": "Sue saw a cat."}])";
  ASSERT_EQ(std::system(("tar -czf " + src + "/ts.tar.gz -C " + src + " data00.json").c_str()), 0);
  test::LoopbackHttpServer server(read_text_file(src + "/ts.tar.gz"), {});
  std::string out, err;
  ASSERT_EQ(test::run_orion("data fetch tinystories --out " + dir + " --url " + server.url("/ts.tar.gz"), &out, &err), 0)
      << err;
  EXPECT_TRUE(file_exists(dir + "/ts.tar.gz"));
  EXPECT_FALSE(file_exists(dir + "/ts.tar.gz.part"));
  ASSERT_TRUE(file_exists(dir + "/ts/data00.json")) << out << err;
  EXPECT_NE(out.find("next: orion data prepare"), std::string::npos) << out;
  // The unpacked shard feeds `data prepare`.
  ASSERT_EQ(test::run_orion("data prepare --tokenizer " + test::data_path("tokenizer/spm_stories/tokenizer.bin") + " --in " +
                                dir + "/ts --out " + dir + "/tok --val-fraction 0 --no-progress",
                            &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("2 documents"), std::string::npos) << out;
  // A second fetch finds the file and downloads nothing.
  ASSERT_EQ(test::run_orion("data fetch tinystories --no-extract --out " + dir + " --url " + server.url("/ts.tar.gz"), &out,
                            &err),
            0);
  EXPECT_NE(out.find("already here"), std::string::npos) << out;
  EXPECT_EQ(server.requests().size(), 1u);
}

}  // namespace
}  // namespace orion
