// Malformed tokenizer files: each gives one orion::Error of kind Input that names the file and the
// problem — never a crash, never a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "base/file.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion {
namespace {

using nlohmann::json;

void write_file(const std::string& path, const std::string& content) { std::ofstream(path, std::ios::binary) << content; }

std::string slurp(const std::string& path) { return read_text_file(path); }

// Loading `path` fails with an Input error whose line names `named_file` and contains `problem`.
void expect_input_error(const std::string& path, const std::string& named_file, const std::string& problem) {
  try {
    load_tokenizer(path);
    ADD_FAILURE() << "no error loading " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input) << e.what();
    EXPECT_NE(std::string(e.what()).find(named_file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
  }
}

std::string stories_bin() { return read_text_file(test::data_path("tokenizer/spm_stories/tokenizer.bin")); }

template <typename T>
std::string pod(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

// ---- llama2.c tokenizer.bin ---------------------------------------------------------------------

TEST(TokenizerErrors, Llama2cEmptyFile) {
  std::string p = test::temp_dir() + "/tokenizer.bin";
  write_file(p, "");
  expect_input_error(p, p, "empty");
}

TEST(TokenizerErrors, Llama2cTruncatedInsideAToken) {
  std::string bin = stories_bin();
  std::string p = test::temp_dir() + "/tokenizer.bin";
  write_file(p, pod<int32_t>(8) + pod<float>(0) + pod<int32_t>(5) + "ab");  // cut inside a piece
  expect_input_error(p, p, "runs past the end");
  write_file(p, bin.substr(0, bin.size() - 3));  // cut inside the last token
  expect_input_error(p, p, "token 511");
  write_file(p, bin.substr(0, 4 + 8 + 5 + 3));  // cut inside the second token's score
  expect_input_error(p, p, "ends inside token 1");
  write_file(p, bin.substr(0, 2));  // cut inside the header
  expect_input_error(p, p, "max_token_length");
}

TEST(TokenizerErrors, Llama2cNegativeAndHugeLengths) {
  std::string p = test::temp_dir() + "/tokenizer.bin";
  write_file(p, pod<int32_t>(8) + pod<float>(0) + pod<int32_t>(-5) + "abcd");
  expect_input_error(p, p, "piece length -5");
  write_file(p, pod<int32_t>(8) + pod<float>(0) + pod<int32_t>(1 << 30) + "abcd");
  expect_input_error(p, p, "piece length 1073741824");
  write_file(p, pod<int32_t>(-1) + pod<float>(0) + pod<int32_t>(1) + "a");
  expect_input_error(p, p, "max_token_length -1");
  // A length above the declared maximum would overflow run.c's merge buffer.
  std::string bin = stories_bin();
  std::string big = pod<int32_t>(2) + bin.substr(4);
  write_file(p, big);
  expect_input_error(p, p, "outside 0..max_token_length");
}

TEST(TokenizerErrors, Llama2cTooFewTokensForByteFallback) {
  std::string p = test::temp_dir() + "/tokenizer.bin";
  std::string content = pod<int32_t>(1);
  for (int i = 0; i < 10; ++i) content += pod<float>(0) + pod<int32_t>(1) + "x";
  write_file(p, content);
  expect_input_error(p, p, "only 10 tokens");
}

// Every prefix and many random corruptions of a real file either load or fail with an Error.
TEST(TokenizerErrors, Llama2cCorruptionsNeverCrash) {
  std::string bin = stories_bin();
  std::string p = test::temp_dir() + "/tokenizer.bin";
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    std::string c = round < 100 ? bin.substr(0, rng() % bin.size()) : bin;
    if (round >= 100)
      for (int k = 0; k < 4; ++k) c[rng() % c.size()] = char(rng() % 256);
    write_file(p, c);
    try {
      auto tok = load_tokenizer(p);
      tok->decode(tok->encode("Once upon a time there was a cat.", true));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input) << e.what();
    }
  }
}

// ---- GPT-2 vocab.json + merges.txt --------------------------------------------------------------

struct BpeFolder {
  std::string dir = test::temp_dir();
  std::string vocab = dir + "/vocab.json", merges = dir + "/merges.txt";
  BpeFolder() {
    write_file(vocab, slurp(test::data_path("tokenizer/small_gpt2/vocab.json")));
    write_file(merges, slurp(test::data_path("tokenizer/small_gpt2/merges.txt")));
  }
};

TEST(TokenizerErrors, Gpt2InvalidJsonAndEmptyVocab) {
  BpeFolder f;
  write_file(f.vocab, "{\"a\": 1, ");
  expect_input_error(f.vocab, f.vocab, "invalid JSON");
  write_file(f.vocab, "");
  expect_input_error(f.vocab, f.vocab, "empty");
  write_file(f.vocab, "[1, 2]");
  expect_input_error(f.vocab, f.vocab, "expected an object");
  write_file(f.vocab, "{\"a\": \"x\"}");
  expect_input_error(f.vocab, f.vocab, "not an integer");
}

TEST(TokenizerErrors, Gpt2MissingMergesFile) {
  BpeFolder f;
  std::remove(f.merges.c_str());
  expect_input_error(f.vocab, f.merges, "merges file is missing");
}

TEST(TokenizerErrors, Gpt2MergeNamesMissingToken) {
  BpeFolder f;
  write_file(f.merges, "#version: 0.2\nĠ t\nzzzq Ġt\n");
  expect_input_error(f.vocab, f.merges, "'zzzq', which is not in the vocabulary");
  expect_input_error(f.vocab, "line 3", "not in the vocabulary");
  // Both parts exist but their concatenation does not.
  write_file(f.merges, "#version: 0.2\nq z\n");
  expect_input_error(f.vocab, f.merges, "'qz', which is not in the vocabulary");
}

TEST(TokenizerErrors, Gpt2MalformedMergeLine) {
  BpeFolder f;
  write_file(f.merges, "#version: 0.2\nĠ t\nabc\n");
  expect_input_error(f.vocab, "line 3", "expected two tokens");
}

TEST(TokenizerErrors, Gpt2VocabMissingByteTokens) {
  BpeFolder f;
  json v = json::parse(slurp(f.vocab));
  v.erase("Ġ");  // the byte 0x20 (space)
  write_file(f.vocab, v.dump());
  expect_input_error(f.vocab, f.vocab, "no token for byte 0x20");
}

// ---- Hugging Face tokenizer.json ----------------------------------------------------------------

struct TokenizerJson {
  std::string path = test::temp_dir() + "/tokenizer.json";
  json j = json::parse(slurp(test::data_path("tokenizer/small_gpt2/tokenizer.json")));
  void save() { write_file(path, j.dump()); }
};

TEST(TokenizerErrors, TokenizerJsonInvalidOrUnsupported) {
  TokenizerJson t;
  write_file(t.path, "{\"model\": ");
  expect_input_error(t.path, t.path, "invalid JSON");

  t.j["model"]["type"] = "WordPiece";
  t.save();
  expect_input_error(t.path, t.path, "model type 'WordPiece' is not supported");

  t.j["model"]["type"] = "BPE";
  // (Metaspace, refused here before tokenizer.json gained SentencePiece-style BPE, is supported now.)
  t.j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  t.save();
  expect_input_error(t.path, t.path, "pre_tokenizer type 'BertPreTokenizer' is not supported");
}

TEST(TokenizerErrors, TokenizerJsonBadMergesAndAddedTokens) {
  TokenizerJson t;
  t.j["model"]["merges"][3] = 42;
  t.save();
  expect_input_error(t.path, "model.merges[3]", "expected a string");

  TokenizerJson u;
  u.j["model"]["merges"].push_back({"Ġt", "nope"});
  u.save();
  expect_input_error(u.path, u.path, "'nope', which is not in the vocabulary");

  TokenizerJson w;
  w.j["added_tokens"][0].erase("id");
  w.save();
  expect_input_error(w.path, "added_tokens[0]", "expected");

  TokenizerJson x;
  x.j["model"].erase("merges");
  x.save();
  expect_input_error(x.path, "model.merges", "no merges");
}

// tokenizer.json files of today's models (tests/testdata/tokenizer/hf_goldens): each problem names
// the file and the JSON path of the field.
struct ModelTokenizerJson {
  std::string dir = test::temp_dir();
  std::string path = dir + "/tokenizer.json";
  json j;
  explicit ModelTokenizerJson(const std::string& kind)
      : j(json::parse(slurp(test::data_path("tokenizer/hf_goldens/" + kind + "/tokenizer.json")))) {}
  void save() { write_file(path, j.dump()); }
};

TEST(TokenizerErrors, TokenizerJsonUnsupportedModelsAndStages) {
  for (const char* type : {"Unigram", "WordPiece", "WordLevel"}) {
    ModelTokenizerJson t("llama3");
    t.j["model"]["type"] = type;
    t.save();
    expect_input_error(t.path, "model.type", fmt::format("model type '{}' is not supported", type));
  }
  ModelTokenizerJson n("qwen25");
  n.j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "BertNormalizer"}}}}};
  n.save();
  expect_input_error(n.path, "normalizer.normalizers[1]", "normalizer type 'BertNormalizer' is not supported");
  ModelTokenizerJson p("llama3");
  p.j["post_processor"]["processors"][1]["type"] = "RobertaProcessing";
  p.save();
  expect_input_error(p.path, "post_processor.processors[1]", "post_processor type 'RobertaProcessing' is not supported");
  ModelTokenizerJson d("mistral");
  d.j["decoder"]["decoders"][3]["stop"] = 1;
  d.save();
  expect_input_error(d.path, "decoder.decoders[3].stop", "not supported");
}

TEST(TokenizerErrors, TokenizerJsonBadRegexNamesTheField) {
  ModelTokenizerJson t("llama3");
  t.j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?i:'s|\\p{L}+";  // unclosed group
  t.save();
  expect_input_error(t.path, "pre_tokenizer.pretokenizers[0].pattern.Regex", "PCRE2 rejects the pattern");
  t.j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Glob", "*"}};
  t.save();
  expect_input_error(t.path, "pre_tokenizer.pretokenizers[0].pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
}

TEST(TokenizerErrors, TokenizerJsonWrongTypes) {
  ModelTokenizerJson a("mistral");
  a.j["model"]["byte_fallback"] = "yes";
  a.save();
  expect_input_error(a.path, "model.byte_fallback", "expected true or false");
  ModelTokenizerJson b("mistral");
  b.j["pre_tokenizer"]["prepend_scheme"] = "sometimes";
  b.save();
  expect_input_error(b.path, "pre_tokenizer.prepend_scheme", "unknown prepend_scheme 'sometimes'");
  ModelTokenizerJson c("llama3");
  c.j["pre_tokenizer"]["pretokenizers"] = 7;
  c.save();
  expect_input_error(c.path, "pre_tokenizer.pretokenizers", "expected an array");
  ModelTokenizerJson d("qwen25");
  d.j["model"]["vocab"]["hello"] = "one";
  d.save();
  expect_input_error(d.path, "model.vocab", "is not an integer");
  ModelTokenizerJson e("llama2");
  e.j["model"]["unk_token"] = "<missing>";
  e.save();
  expect_input_error(e.path, "model.unk_token", "'<missing>' is not in the vocabulary");
}

TEST(TokenizerErrors, TokenizerJsonUnknownMergesAndDuplicateIds) {
  ModelTokenizerJson m("qwen25");
  m.j["model"]["merges"].push_back({"Ġt", "nope"});
  m.save();
  expect_input_error(m.path, fmt::format("model.merges[{}]", m.j["model"]["merges"].size() - 1),
                     "'nope', which is not in the vocabulary");
  ModelTokenizerJson v("llama3");
  v.j["model"]["vocab"]["extra"] = v.j["model"]["vocab"]["a"];
  v.save();
  expect_input_error(v.path, "model.vocab", "have the same id");
  ModelTokenizerJson a("llama3");
  a.j["added_tokens"][1]["id"] = a.j["added_tokens"][0]["id"];
  a.save();
  expect_input_error(a.path, "added_tokens[1]", "is also added_tokens[0]");
  ModelTokenizerJson t("llama3");
  t.j["post_processor"]["processors"][1]["single"][0]["SpecialToken"]["id"] = "<nope>";
  t.j["post_processor"]["processors"][1].erase("special_tokens");
  t.save();
  expect_input_error(t.path, "post_processor.processors[1].single[0].SpecialToken.id", "'<nope>', which is not a token");
}

TEST(TokenizerErrors, TokenizerConfigBesideTheFile) {
  ModelTokenizerJson t("mistral");
  t.save();
  const std::string config = t.dir + "/tokenizer_config.json";
  write_file(config, "{\"bos_token\": 5}");
  expect_input_error(t.path, config, "bos_token");
  write_file(config, "{\"eos_token\": \"<not a token>\"}");
  expect_input_error(t.path, config, "'<not a token>' is not a token");
  write_file(config, "[1, 2");
  expect_input_error(t.path, config, "invalid JSON");
}

// Every field of each model's tokenizer.json replaced in turn by values of other types: loading
// and using the tokenizer either works or gives an orion::Error — no other exception, no crash.
TEST(TokenizerErrors, TokenizerJsonAnyFieldOfAnyTypeFailsCleanly) {
  const json replacements = json::array({nullptr, 7, -1, 4294967297LL, 1.5, "x", "(?<", json::array(), json::object(), true,
                                         json::array({1, "a"}), json{{"type", "Sequence"}}});
  int loaded = 0, refused = 0;
  for (const char* kind : {"llama3", "qwen25", "smollm2", "mistral", "llama2"}) {
    ModelTokenizerJson t(kind);
    // Every place outside the vocabulary and merges, plus one entry of each.
    std::vector<json::json_pointer> places;
    json flat = t.j;
    flat["model"].erase("vocab");
    flat["model"].erase("merges");
    const json leaves = flat.flatten();  // "/a/0/b" → value
    for (const auto& [where, value] : leaves.items()) {
      json::json_pointer p(where);
      for (; !p.empty(); p = p.parent_pointer()) places.push_back(p);
    }
    places.push_back(json::json_pointer("/model/vocab/" + t.j["model"]["vocab"].begin().key()));
    places.push_back(json::json_pointer("/model/merges/0"));
    std::sort(places.begin(), places.end(), [](auto& a, auto& b) { return a.to_string() < b.to_string(); });
    places.erase(std::unique(places.begin(), places.end()), places.end());
    for (size_t i = 0; i < places.size(); ++i) {
      ModelTokenizerJson m(kind);
      m.j[places[i]] = replacements[i % replacements.size()];
      m.save();
      try {
        auto tok = load_tokenizer(m.path);
        std::vector<int> ids = tok->encode("Hi <s> <|im_end|> 12 caf\xc3\xa9 \xf0\x9f\x99\x82", true);
        tok->decode(ids);
        ++loaded;
      } catch (const Error& e) {
        EXPECT_EQ(e.kind() == ErrorKind::Input || e.kind() == ErrorKind::Runtime, true) << e.what();
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << kind << ": " << places[i].to_string() << " = " << replacements[i % replacements.size()].dump()
                      << " escaped as " << e.what();
      }
    }
  }
  EXPECT_GT(refused, 50);
  EXPECT_GT(loaded, 10);  // some replacements are harmless (e.g. a number where a string is ignored)
}

// ---- SentencePiece and dispatch ---------------------------------------------------------------

TEST(TokenizerErrors, SentencePieceEmptyOrGarbage) {
  std::string p = test::temp_dir() + "/tokenizer.model";
  write_file(p, "");
  expect_input_error(p, p, "empty");
  write_file(p, "this is not a protobuf at all \xFF\xFF\xFF\xFF");
  expect_input_error(p, p, "not a valid SentencePiece model");
}

TEST(TokenizerErrors, MissingPathAndEmptyFolder) {
  std::string dir = test::temp_dir();
  expect_input_error(dir + "/nothing.bin", dir + "/nothing.bin", "no such file");
  expect_input_error(dir, dir, "holds no tokenizer");
}

}  // namespace
}  // namespace orion
