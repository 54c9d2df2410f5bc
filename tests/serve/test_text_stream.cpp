// The streamed text of a completion: stop strings cut it, and nothing is released that may still
// change (the start of a stop string, half a UTF-8 character).
#include <gtest/gtest.h>

#include "serve/text_stream.h"

namespace orion::serve {
namespace {

TEST(TextStream, HoldsBackAPossibleStopStringAndCutsAtIt) {
  TextStream s({"END"});
  EXPECT_FALSE(s.append("hello E"));
  EXPECT_EQ(s.take_ready(), "hello ");  // "E" may start "END"
  EXPECT_FALSE(s.append("N"));
  EXPECT_EQ(s.take_ready(), "");
  EXPECT_TRUE(s.append("D and more"));  // the stop string completes across three pieces
  EXPECT_EQ(s.take_rest(), "");
  EXPECT_EQ(s.text(), "hello ");
}

TEST(TextStream, AHeldBackPrefixThatDoesNotCompleteIsReleased) {
  TextStream s({"END"});
  s.append("an E");
  EXPECT_EQ(s.take_ready(), "an ");
  EXPECT_FALSE(s.append("XIT E"));
  EXPECT_EQ(s.take_ready(), "EXIT ");
}

TEST(TextStream, TheEarliestStopStringWinsAndTheRestComesAtTheEnd) {
  TextStream s({"\n\n", "."});
  EXPECT_FALSE(s.append("one two"));
  EXPECT_TRUE(s.append(" three. four\n\n"));
  EXPECT_EQ(s.take_ready() + s.take_rest(), "one two three");
  TextStream t({"zz"});
  t.append("abc z");
  EXPECT_EQ(t.take_ready(), "abc ");
  EXPECT_EQ(t.take_rest(), "z");  // at the end a held-back prefix is real text
}

TEST(TextStream, NeverSplitsAUtf8Character) {
  TextStream s({});
  const std::string e_acute = "\xC3\xA9", euro = "\xE2\x82\xAC";
  s.append("caf" + e_acute.substr(0, 1));
  EXPECT_EQ(s.take_ready(), "caf");
  s.append(e_acute.substr(1) + euro.substr(0, 2));
  EXPECT_EQ(s.take_ready(), e_acute);
  s.append(euro.substr(2));
  EXPECT_EQ(s.take_ready(), euro);
  EXPECT_EQ(incomplete_utf8_tail("ab"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("a\xF0\x9F\x98\x80"), 0u);
}

}  // namespace
}  // namespace orion::serve
