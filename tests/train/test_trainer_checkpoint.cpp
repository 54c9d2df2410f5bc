// Checkpoints: a round trip keeps every bit; damaged files (bad magic, other version, truncated,
// flipped byte, broken header, non-finite weight) are Input errors naming the file and the field;
// stray temporary files are never taken for checkpoints; only the newest K are kept; an
// in-process resume continues bit-identically.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "support.h"
#include "train/loop/checkpoint.h"
#include "train/loop/trainer.h"

using namespace orion;
using namespace orion::train;
namespace fs = std::filesystem;

namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = 32, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
  c.vocab_size = c.padded_vocab = 64, c.seq_len = 16;
  return c;
}

// A parameter set and an optimiser that has taken two steps on made-up gradients.
struct Trained {
  Params p{tiny()};
  Grads g{tiny()};
  AdamW opt{p};
  Trained() {
    init_params(p, 3);
    for (int s = 0; s < 2; ++s) {
      for (size_t i = 0; i < g.size(); ++i) g.data()[i] = float((i * 7 + s) % 13) * 1e-3f;
      opt.step(p, g, 1e-3f);
    }
  }
};

CheckpointState some_state() {
  CheckpointState s;
  s.step = 7, s.data_position = 14, s.rng_state = 0x1234abcdull, s.skipped_steps = 1;
  s.tokenizer = "/x/tokenizer.bin", s.tokenizer_hash = 99;
  return s;
}

std::string expect_input_error(const std::string& path, const std::string& field) {
  try {
    read_checkpoint(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input) << e.what();
    EXPECT_EQ(e.context().field, field) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "the error names the file: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for a damaged " << field;
  return "";
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void spit(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

TEST(Checkpoint, RoundTripKeepsEveryBit) {
  Trained t;
  const std::string path = test::temp_dir() + "/ckpt_00000007.ckpt";
  write_checkpoint(path, some_state(), {{"lr", 0.5}}, t.p, t.opt);
  Checkpoint ck = read_checkpoint(path);
  EXPECT_EQ(ck.config.describe(), tiny().describe());
  ASSERT_EQ(ck.params.size(), t.p.size());
  EXPECT_EQ(0, std::memcmp(ck.params.data(), t.p.data(), t.p.size() * sizeof(float)));
  auto& opt = t.opt;
  EXPECT_EQ(ck.m, opt.m());
  EXPECT_EQ(ck.v, opt.v());
  EXPECT_EQ(ck.state.adam_steps, 2);
  EXPECT_EQ(ck.state.step, 7);
  EXPECT_EQ(ck.state.data_position, 14u);
  EXPECT_EQ(ck.state.rng_state, 0x1234abcdull);
  EXPECT_EQ(ck.state.skipped_steps, 1);
  EXPECT_EQ(ck.state.tokenizer, "/x/tokenizer.bin");
  EXPECT_EQ(ck.state.tokenizer_hash, 99u);
  EXPECT_EQ(ck.options["lr"], 0.5);
}

// The block options of Llama's relatives survive a checkpoint's config record; a plain config's
// record has none of their keys (so its bytes and hash are as before).
TEST(Checkpoint, ConfigRecordKeepsTheRelativesBlockOptions) {
  ModelConfig c = tiny();
  const nlohmann::json plain = config_to_json(c);
  for (const char* key : {"head_size", "rope_scaling", "sliding_window"}) EXPECT_FALSE(plain.contains(key)) << key;
  c.head_size = 32;
  c.rope_scaling = {RopeScaling::Kind::Llama3, 8, 1, 4, 64};
  c.sliding_window = 5;
  const ModelConfig back = config_from_json(config_to_json(c), "test");
  EXPECT_EQ(back.head_size, 32);
  EXPECT_EQ(back.rope_scaling, c.rope_scaling);
  EXPECT_EQ(back.sliding_window, 5);
  EXPECT_EQ(back.describe(), c.describe());
  nlohmann::json bad = config_to_json(c);
  bad["rope_scaling"]["rope_type"] = "yarn";
  EXPECT_THROW(config_from_json(bad, "test"), Error);
}

TEST(Checkpoint, DamagedFilesAreClearInputErrors) {
  Trained t;
  const std::string dir = test::temp_dir(), good = dir + "/good.ckpt", bad = dir + "/bad.ckpt";
  write_checkpoint(good, some_state(), nlohmann::json::object(), t.p, t.opt);
  const std::vector<char> bytes = slurp(good);

  auto damaged = [&](auto edit) {
    std::vector<char> b = bytes;
    edit(b);
    spit(bad, b);
  };
  damaged([](auto& b) { b[0] = 'X'; });
  EXPECT_NE(expect_input_error(bad, "magic").find("not an Orion checkpoint"), std::string::npos);
  damaged([](auto& b) { b[8] = 9; });
  EXPECT_NE(expect_input_error(bad, "version").find("another Orion version"), std::string::npos);
  damaged([](auto& b) { b.resize(b.size() - 100); });
  EXPECT_NE(expect_input_error(bad, "size").find("truncated"), std::string::npos);
  damaged([](auto& b) { b.resize(20); });
  expect_input_error(bad, "n_floats");  // the fixed header itself is cut
  damaged([](auto& b) { b[b.size() / 2] ^= 0x40; });
  expect_input_error(bad, "checksum");
  damaged([](auto& b) { b[32] = '['; });
  expect_input_error(bad, "header");
  spit(bad, {});
  expect_input_error(bad, "magic");

  // A NaN weight with a matching checksum (written by a buggy tool) is still refused.
  Trained nan;
  nan.p.data()[0] = NAN;
  write_checkpoint(bad, some_state(), nlohmann::json::object(), nan.p, nan.opt);
  EXPECT_NE(expect_input_error(bad, "params").find("tok_emb[0]"), std::string::npos);
}

TEST(Checkpoint, StrayTemporaryFilesAreIgnoredAndOnlyKeepAreKept) {
  Trained t;
  const std::string dir = test::temp_dir();
  for (int64_t step : {5, 10, 15, 20}) {
    CheckpointState s = some_state();
    s.step = step;
    save_checkpoint(dir, s, nlohmann::json::object(), t.p, t.opt, 2);
  }
  auto all = list_checkpoints(dir);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(fs::path(all[0]).filename(), "ckpt_00000015.ckpt");
  EXPECT_EQ(fs::path(all[1]).filename(), "ckpt_00000020.ckpt");
  // What a process killed mid-write leaves behind (write_file_atomic's temporary), and other junk.
  spit(dir + "/ckpt_00000025.ckpt.tmp.4242", {'O', 'R', 'I'});
  spit(dir + "/ckpt_00000030.ckpt~", {'x'});
  EXPECT_EQ(list_checkpoints(dir).size(), 2u);
  std::string used;
  EXPECT_EQ(load_latest_checkpoint(dir, &used).state.step, 20);
  EXPECT_EQ(fs::path(used).filename(), "ckpt_00000020.ckpt");
  // A damaged newest checkpoint is skipped for the one before it.
  std::vector<char> b = slurp(all[1]);
  b.resize(b.size() / 2);
  spit(all[1], b);
  EXPECT_EQ(load_latest_checkpoint(dir, &used).state.step, 15);
  // An explicit damaged file is an error, not a silent fallback.
  EXPECT_THROW(load_latest_checkpoint(all[1]), Error);
  EXPECT_THROW(load_latest_checkpoint(test::temp_dir()), Error);  // empty folder
}

TEST(Checkpoint, ResumeInProcessIsBitIdentical) {
  auto options = [](const std::string& dir, int64_t steps) {
    TrainOptions o;
    o.config = "stories260k";
    o.data = "builtin:200";
    o.vocab = 300, o.batch = 2, o.seq = 16, o.steps = steps, o.warmup = 2;
    o.eval_every = 0, o.checkpoint_every = 0, o.sample_tokens = 0, o.progress = false, o.export_format = "none";
    o.out = dir;
    return o;
  };
  const std::string a = test::temp_dir(), b = test::temp_dir();
  Trainer straight(options(a, 8));
  std::vector<float> losses;
  for (int i = 0; i < 8; ++i) losses.push_back(straight.step().loss);

  TrainOptions first = options(b, 8);
  first.stop_after = 3;
  Trainer(first).run();
  TrainOptions rest = options(b, 0);
  rest.resume = b;
  Trainer resumed(rest);
  ASSERT_EQ(resumed.step_index(), 3);
  for (int i = 3; i < 8; ++i) EXPECT_EQ(resumed.step().loss, losses[size_t(i)]) << "step " << i;
  EXPECT_EQ(0, std::memcmp(resumed.params().data(), straight.params().data(), straight.params().size() * sizeof(float)));
}
