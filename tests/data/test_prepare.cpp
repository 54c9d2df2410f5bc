// `data prepare` → token shards → TokenDataset: the tokens round-trip to the documents, the
// train/validation split is exact and disjoint, the output does not depend on the thread count, and
// batches (sequential as llm.c, shuffled, sharded by rank) are disjoint, complete and deterministic.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "base/error.h"
#include "base/file.h"
#include "data/builtin_corpus.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion::data {
namespace {

std::string spm_tokenizer() { return test::data_path("tokenizer/spm_stories/tokenizer.bin"); }
std::string gpt2_tokenizer() { return test::data_path("tokenizer/small_gpt2/vocab.json"); }

PrepareResult prepare(const std::string& tokenizer, const std::string& input, const std::string& out, int threads = 2,
                      double val = 0.1, uint64_t shard_tokens = uint64_t(1) << 27) {
  PrepareOptions o;
  o.tokenizer = tokenizer;
  o.inputs = {input};
  o.out_dir = out;
  o.threads = threads;
  o.val_fraction = val;
  o.shard_tokens = shard_tokens;
  o.progress = false;
  return prepare_dataset(o);
}

// Every sequence of every file, decoded (the delimiter dropped).
std::vector<std::string> decode_all(const Tokenizer& tok, const std::vector<std::string>& files, int delimiter) {
  std::vector<std::string> out;
  for (const auto& path : files) {
    TokenFile f = open_token_file(path, tok.vocab_size());
    for (auto [b, e] : split_sequences(f.tokens, f.count, delimiter)) {
      EXPECT_EQ(f.tokens[b], delimiter) << "a document was cut between shards in " << path;
      // llama2.c: decode with the BOS, which drops the dummy-prefix space; GPT-2: drop <|endoftext|>.
      const size_t skip = tok.bos_id() == delimiter ? 0 : 1;
      std::vector<int> ids(f.tokens + b + skip, f.tokens + e);
      out.push_back(tok.decode(ids));
    }
  }
  return out;
}

TEST(DataPrepare, Llama2cShardsRoundTripAndSplitExactly) {
  const std::string out = test::temp_dir();
  PrepareResult r = prepare(spm_tokenizer(), "builtin:300", out);
  EXPECT_EQ(r.format, TokenFormat::Llama2c);
  EXPECT_EQ(r.documents, 300u);
  EXPECT_EQ(r.val_documents, 30u);
  auto tok = load_tokenizer(spm_tokenizer());
  auto train = decode_all(*tok, r.train_files, 1), val = decode_all(*tok, r.val_files, 1);
  ASSERT_EQ(train.size(), 270u);
  ASSERT_EQ(val.size(), 30u);
  const auto docs = builtin_corpus(300);
  size_t ti = 0, vi = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (is_validation_document(i, 0.1)) EXPECT_EQ(val[vi++], docs[i]) << i;
    else EXPECT_EQ(train[ti++], docs[i]) << i;
  }
  EXPECT_TRUE(file_exists(out + "/meta.json"));
  EXPECT_NE(read_text_file(out + "/meta.json").find("\"val_documents\": 30"), std::string::npos);
}

TEST(DataPrepare, SameBytesForAnyThreadCountAndShardSize) {
  const std::string a = test::temp_dir(), b = test::temp_dir(), c = test::temp_dir();
  PrepareResult ra = prepare(spm_tokenizer(), "builtin:200", a, 1);
  PrepareResult rb = prepare(spm_tokenizer(), "builtin:200", b, 2);
  ASSERT_EQ(ra.train_files.size(), 1u);
  EXPECT_EQ(read_text_file(ra.train_files[0]), read_text_file(rb.train_files[0]));
  EXPECT_EQ(read_text_file(ra.val_files[0]), read_text_file(rb.val_files[0]));
  // Small shards: many files, documents never cut, the same tokens in order.
  PrepareResult rc = prepare(spm_tokenizer(), "builtin:200", c, 2, 0.1, 5000);
  EXPECT_GT(rc.train_files.size(), 3u);
  std::string joined;
  for (const auto& f : rc.train_files) joined += read_text_file(f);
  EXPECT_EQ(joined, read_text_file(ra.train_files[0]));
  auto tok = load_tokenizer(spm_tokenizer());
  EXPECT_EQ(decode_all(*tok, rc.train_files, 1).size(), 180u);
}

TEST(DataPrepare, Gpt2DocumentsStartWithEndOfTextInLlmcFiles) {
  const std::string out = test::temp_dir();
  std::ofstream(out + "/in.txt") << "Hello world.\n\nSecond document here.\n\n\nThird one!\n";
  PrepareResult r = prepare(gpt2_tokenizer(), out + "/in.txt", out + "/tok", 2, 0.0);
  EXPECT_EQ(r.format, TokenFormat::Llmc);
  EXPECT_EQ(r.val_documents, 0u);
  EXPECT_TRUE(r.val_files.empty());
  auto tok = load_tokenizer(gpt2_tokenizer());
  ASSERT_GE(tok->eos_id(), 0);
  EXPECT_EQ(decode_all(*tok, r.train_files, tok->eos_id()),
            (std::vector<std::string>{"Hello world.", "Second document here.", "Third one!"}));
  EXPECT_EQ(open_token_file(r.train_files[0], -1, TokenFormat::Llmc).format, TokenFormat::Llmc);
}

TEST(DataPrepare, ErrorsAreClear) {
  const std::string out = test::temp_dir();
  EXPECT_THROW(prepare(spm_tokenizer(), "builtin:10", out, 1, 1.5), Error);
  EXPECT_THROW(prepare("/no/tokenizer.bin", "builtin:10", out), Error);
  std::ofstream(out + "/empty.txt") << "\n\n";
  try {
    prepare(spm_tokenizer(), out + "/empty.txt", out + "/x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no documents"), std::string::npos) << e.what();
  }
}

// A token file whose token at position p is p (mod 60000), so a row's first token tells where it
// starts.
std::string counting_file(const std::string& dir, const std::string& name, size_t n, size_t start = 0) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = uint16_t((start + i) % 60000);
  write_token_file(dir + "/" + name, t, TokenFormat::Llama2c);
  return dir + "/" + name;
}

TEST(TokenDataset, SequentialOrderIsLlmcs) {
  const std::string dir = test::temp_dir();
  const std::string f = counting_file(dir, "a.bin", 1000);
  TokenDataset d({f}, {.B = 4, .T = 8});
  // llm.c: batch i reads B·T+1 tokens from i·B·T; rows are consecutive T-token slices.
  EXPECT_EQ(d.batches_per_epoch(), (1000u - 1) / 32);
  for (uint64_t i = 0; i < 2 * d.batches_per_epoch() + 3; ++i) {
    Batch b = d.next();
    const int start = int(i % d.batches_per_epoch()) * 32;
    for (int r = 0; r < 4; ++r)
      for (int t = 0; t < 8; ++t) {
        EXPECT_EQ(b.inputs[r * 8 + t], start + r * 8 + t);
        EXPECT_EQ(b.targets[r * 8 + t], start + r * 8 + t + 1);
      }
  }
  EXPECT_EQ(d.position(), 2 * d.batches_per_epoch() + 3);
  d.seek(5);
  EXPECT_EQ(d.next().tokens, d.batch(5).tokens);
}

TEST(TokenDataset, RanksAreDisjointAndComplete) {
  const std::string dir = test::temp_dir();
  std::vector<std::string> files = {counting_file(dir, "train_0.bin", 3001), counting_file(dir, "train_1.bin", 2000, 3001)};
  for (bool shuffle : {false, true}) {
    TokenDataset base(files, {.B = 2, .T = 16, .shuffle = shuffle, .seed = 11});
    const int world = 3;
    std::set<int> starts;
    size_t rows = 0;
    for (int rank = 0; rank < world; ++rank) {
      TokenDataset d = base.shard(rank, world);
      for (uint64_t i = 0; i < d.batches_per_epoch(); ++i) {
        Batch b = d.batch(i);
        for (int r = 0; r < 2; ++r) {
          starts.insert(b.tokens[r * 17]);
          ++rows;
          for (int t = 1; t <= 16; ++t) EXPECT_EQ(b.tokens[r * 17 + t], b.tokens[r * 17] + t);  // contiguous
        }
      }
    }
    EXPECT_EQ(starts.size(), rows) << "ranks overlap (shuffle=" << shuffle << ")";
    // Complete: every window of T tokens that a full round can hold is read by some rank.
    const size_t windows = 3000 / 16 + 1999 / 16;
    const size_t expect = shuffle ? windows / (2 * world) * (2 * world) : (3000 / 96 + 1999 / 96) * 96 / 16;
    EXPECT_EQ(rows, expect) << "shuffle=" << shuffle;
    for (int s : starts) EXPECT_EQ((s < 3001 ? s : s - 3001) % 16, 0);
  }
}

TEST(TokenDataset, ShuffleIsSeededAndCoversEveryWindowEachEpoch) {
  const std::string dir = test::temp_dir();
  const std::string f = counting_file(dir, "a.bin", 1601);  // 100 windows of 16
  TokenDataset a({f}, {.B = 5, .T = 16, .shuffle = true, .seed = 1});
  TokenDataset b({f}, {.B = 5, .T = 16, .shuffle = true, .seed = 1});
  TokenDataset c({f}, {.B = 5, .T = 16, .shuffle = true, .seed = 2});
  ASSERT_EQ(a.batches_per_epoch(), 20u);
  std::set<int> epoch0, epoch1;
  std::vector<int> order0, order1;
  for (uint64_t i = 0; i < 40; ++i) {
    Batch x = a.batch(i);
    EXPECT_EQ(x.tokens, b.batch(i).tokens);
    for (int r = 0; r < 5; ++r) (i < 20 ? epoch0 : epoch1).insert(x.tokens[r * 17]);
    for (int r = 0; r < 5; ++r) (i < 20 ? order0 : order1).push_back(x.tokens[r * 17]);
  }
  EXPECT_EQ(epoch0.size(), 100u);
  EXPECT_EQ(epoch1.size(), 100u);
  EXPECT_NE(order0, order1);  // a new permutation every epoch
  EXPECT_NE(a.batch(0).tokens, c.batch(0).tokens);
  std::vector<int> sorted = order0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(order0, sorted);
}

TEST(TokenDataset, OpensPreparedFoldersAndRefusesTooLittleData) {
  const std::string out = test::temp_dir();
  prepare(spm_tokenizer(), "builtin:100", out);
  auto tok = load_tokenizer(spm_tokenizer());
  TokenDataset train = TokenDataset::open(out, "train", {.B = 2, .T = 32, .vocab_size = tok->vocab_size()});
  TokenDataset val = TokenDataset::open(out, "val", {.B = 2, .T = 32});
  EXPECT_EQ(train.files().size(), 1u);
  EXPECT_NE(train.files()[0].path.find("train_000.bin"), std::string::npos);
  EXPECT_NE(val.files()[0].path.find("val_000.bin"), std::string::npos);
  EXPECT_EQ(train.batch(0).tokens[0], 1);  // the first document's BOS
  // llama2.c folders (data00.bin, data01.bin, …): the first shard is validation.
  const std::string l2 = test::temp_dir();
  counting_file(l2, "data00.bin", 500);
  counting_file(l2, "data01.bin", 500);
  counting_file(l2, "data02.bin", 500);
  EXPECT_EQ(TokenDataset::split_files(l2, "val"), std::vector<std::string>{l2 + "/data00.bin"});
  EXPECT_EQ(TokenDataset::split_files(l2, "train").size(), 2u);
  try {
    TokenDataset({counting_file(l2, "tiny.bin", 50)}, {.B = 4, .T = 64});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("do not fill one batch"), std::string::npos) << e.what();
  }
  EXPECT_THROW(TokenDataset::open(out, "test", {}), Error);
}

}  // namespace
}  // namespace orion::data
