// The built-in corpus: deterministic (a hash of the first stories is pinned, so any change to the
// generator or a platform difference shows up), varied (thousands of distinct sentences), and shaped
// like TinyStories (about 100–200 words, no template left unfilled, no blank lines).
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "data/builtin_corpus.h"
#include "data/rng.h"

namespace orion::data {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

size_t word_count(const std::string& s) {
  std::istringstream in(s);
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

TEST(BuiltinCorpus, HashOfFirstStoriesIsPinned) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& s : builtin_corpus(200)) h = fnv1a(s + '\x1e', h);
  // Regenerate only on purpose (a changed template changes every trained model's data):
  // print the value below and paste it here.
  EXPECT_EQ(h, 0xd75ca26ea476a17eull) << std::hex << "0x" << h;
}

TEST(BuiltinCorpus, SameSeedSameTextDifferentSeedDifferentText) {
  EXPECT_EQ(builtin_corpus(50, 3), builtin_corpus(50, 3));
  EXPECT_EQ(builtin_story(17, 3), builtin_corpus(50, 3)[17]);
  EXPECT_NE(builtin_corpus(50, 3), builtin_corpus(50, 4));
  EXPECT_NE(builtin_story(0), builtin_story(1));
}

TEST(BuiltinCorpus, ManyDistinctSentencesAndStoryShapes) {
  std::set<std::string> sentences, openings;
  for (const auto& s : builtin_corpus(3000)) {
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '.' || s[i] == '!' || s[i] == '?') {
        sentences.insert(s.substr(start, i + 1 - start));
        start = i + 1;
      }
    openings.insert(s.substr(0, s.find(' ', s.find(' ') + 1)));
  }
  EXPECT_GE(sentences.size(), 5000u);
  EXPECT_GE(openings.size(), 8u);
}

TEST(BuiltinCorpus, StoriesLookLikeTinyStories) {
  size_t words = 0;
  const auto corpus = builtin_corpus(1000, 9);
  for (const auto& s : corpus) {
    const size_t n = word_count(s);
    words += n;
    EXPECT_GE(n, 50u) << s;
    EXPECT_LE(n, 250u) << s;
    EXPECT_EQ(s.find('{'), std::string::npos) << s;     // every slot filled
    EXPECT_EQ(s.find("\n\n"), std::string::npos) << s;  // stays one document in a text file
    EXPECT_EQ(s.find("  "), std::string::npos) << s;
    for (unsigned char c : s) EXPECT_TRUE(c == '\n' || (c >= 32 && c < 127)) << s;
    EXPECT_TRUE(s.back() == '.' || s.back() == '!' || s.back() == '"') << s;
  }
  EXPECT_GE(words / corpus.size(), 100u);
  EXPECT_LE(words / corpus.size(), 200u);
}

TEST(Rng, IsTheSameEverywhere) {
  // SplitMix64's published first outputs for seed 0 after the initial scramble are fixed numbers;
  // pinning a few guards against an accidental change of the generator.
  Rng r(0);
  const uint64_t a = r.next(), b = r.next();
  Rng again(0);
  EXPECT_EQ(again.next(), a);
  EXPECT_EQ(again.next(), b);
  EXPECT_NE(a, b);
  Rng u(5);
  std::vector<int> hist(10, 0);
  for (int i = 0; i < 100000; ++i) ++hist[u.below(10)];
  for (int c : hist) EXPECT_NEAR(c, 10000, 500);
  std::vector<int> v(100);
  for (int i = 0; i < 100; ++i) v[i] = i;
  Rng s1(1), s2(1);
  auto v1 = v, v2 = v;
  s1.shuffle(v1);
  s2.shuffle(v2);
  EXPECT_EQ(v1, v2);
  EXPECT_NE(v1, v);
  std::sort(v1.begin(), v1.end());
  EXPECT_EQ(v1, v);
}

}  // namespace
}  // namespace orion::data
