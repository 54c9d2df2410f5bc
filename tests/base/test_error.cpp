#include <gtest/gtest.h>

#include "base/error.h"
#include "base/file.h"
#include "support.h"

namespace orion {

TEST(Error, LineNamesFileFieldOffsetAndHint) {
  try {
    throw_input_error("m.bin", "expected 7 ints", "header", 12, "re-export the model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_STREQ(e.what(), "m.bin: field 'header' at byte 12: expected 7 ints (hint: re-export the model)");
  }
}

TEST(Error, CheckThrowsInternal) {
  int x = 1;
  EXPECT_THROW(ORION_CHECK(x == 2, "x is {}", x), Error);
}

TEST(File, AtomicWriteReplacesOrKeepsOld) {
  std::string dir = test::temp_dir(), p = dir + "/f.txt";
  write_file_atomic(p, [](FileWriter& w) { w.write_str("old"); });
  EXPECT_EQ(read_text_file(p), "old");
  EXPECT_THROW(write_file_atomic(p,
                                 [](FileWriter& w) {
                                   w.write_str("partial");
                                   throw_runtime_error("simulated failure");
                                 }),
               Error);
  EXPECT_EQ(read_text_file(p), "old");  // the failed write left the old content
  write_file_atomic(p, [](FileWriter& w) { w.write_str("new"); });
  EXPECT_EQ(read_text_file(p), "new");
}

TEST(File, ReaderReportsTruncation) {
  uint8_t buf[6] = {1, 0, 0, 0, 2, 0};
  ByteReader r(buf, sizeof buf, "x.bin");
  EXPECT_EQ(r.read<int32_t>("a"), 1);
  try {
    r.read<int32_t>("b");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.bin: field 'b' at byte 4"), std::string::npos) << e.what();
  }
}

TEST(File, MissingFileIsInputError) {
  try {
    MappedFile::open("/nonexistent/model.bin");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.bin"), std::string::npos);
  }
}

}  // namespace orion
