// json_number<T> (base/json_error.h): a JSON value as an arithmetic type only when it fits — the
// unchecked nlohmann get<T> of 1.1e51 into an int was undefined behaviour (fuzz_train_config).
#include <gtest/gtest.h>

#include "base/json_error.h"

namespace orion {
namespace {

using nlohmann::json;

TEST(JsonNumber, IntegersWithinRangeConvert) {
  EXPECT_EQ(json_number<int>(json::parse("42")), 42);
  EXPECT_EQ(json_number<int>(json::parse("-7")), -7);
  EXPECT_EQ(json_number<int64_t>(json::parse("9007199254740993")), 9007199254740993LL);
  EXPECT_EQ(json_number<uint64_t>(json::parse("18446744073709551615")), 18446744073709551615ULL);
  EXPECT_FLOAT_EQ(json_number<float>(json::parse("1e-5")), 1e-5f);
  EXPECT_FLOAT_EQ(json_number<float>(json::parse("3")), 3.0f);
}

TEST(JsonNumber, ValuesThatDoNotFitAreTypeErrors) {
  for (const char* text : {"1.1e51", "2.5", "4294967296", "-1e30", "\"12\"", "null", "true"})
    EXPECT_THROW(json_number<int>(json::parse(text)), json::type_error) << text;
  EXPECT_THROW(json_number<uint64_t>(json::parse("-1")), json::type_error);
  EXPECT_THROW(json_number<float>(json::parse("1e300")), json::type_error);
  EXPECT_THROW(json_number<float>(json::parse("-1e39")), json::type_error);
  EXPECT_EQ(json_number<double>(json::parse("1e300")), 1e300);
}

}  // namespace
}  // namespace orion
