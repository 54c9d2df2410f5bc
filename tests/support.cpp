#include "support.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace orion::test {
namespace fs = std::filesystem;

std::string data_path(const std::string& rel) { return std::string(ORION_TEST_DATA) + "/" + rel; }

std::string shared_path(const std::string& rel) {
  const char* env = std::getenv("ORION_SHARED_DIR");
  std::string root = env ? env : ORION_SHARED_DIR;
  std::error_code ec;
  if (!fs::exists(root + "/" + rel, ec)) return "";
  return root + "/" + rel;
}

namespace {
struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (auto& d : dirs) fs::remove_all(d, ec);
  }
} temp_dirs;
}  // namespace

std::string temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "orion-test-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back(0);
  if (!mkdtemp(buf.data())) return "";
  temp_dirs.dirs.emplace_back(buf.data());
  return buf.data();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int count_lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

int run_orion(const std::string& args, std::string* out, std::string* err) {
  std::string dir = temp_dir();
  std::string cmd = std::string(ORION_BINARY) + " " + args + " >" + dir + "/out 2>" + dir + "/err </dev/null";
  int rc = std::system(cmd.c_str());
  if (out) *out = read_text(dir + "/out");
  if (err) *err = read_text(dir + "/err");
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

std::map<int, double> run_losses(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::map<int, double> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    EXPECT_FALSE(j["loss"].is_null()) << "a non-finite loss in " << line;
    EXPECT_FALSE(j["skipped"].get<bool>()) << line;
    out[j["step"].get<int>()] = j["loss"].is_null() ? NAN : j["loss"].get<double>();
  }
  return out;
}

ModelConfig small_anesim_config(Arch arch) {
  ModelConfig c = config_preset(arch == Arch::GPT2 ? "gpt2-tiny" : "stories260k");
  if (arch == Arch::GPT2)
    c.dim = 256, c.hidden_dim = 1024, c.n_heads = 4, c.n_kv_heads = 4, c.n_layers = 2, c.vocab_size = c.padded_vocab = 2000,
    c.seq_len = 256;
  else c.dim = 192, c.hidden_dim = 512, c.n_heads = 6, c.n_kv_heads = 3, c.n_layers = 2, c.seq_len = 256;
  c.tied_embeddings = false;
  return c;
}

LoraAdapter trained_like_adapter(const ModelConfig& c, int rank, float alpha, uint64_t seed,
                                 const std::vector<LoraTarget>& targets, float b_std) {
  LoraAdapter a(c, rank, alpha, targets);
  a.init(seed);
  std::mt19937 rng{uint32_t(seed)};
  std::normal_distribution<float> n(0.0f, b_std);
  for (const LoraTensor& t : a.tensors())
    for (int64_t i = 0; i < t.out * rank; i++) a.B(t)[i] = n(rng);
  return a;
}

}  // namespace orion::test
