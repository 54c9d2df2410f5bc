// anesim's MILBlob reader against hand-made files in the public coremltools layout (correct ones
// and every kind of broken one), and the compiler's weight files for every chip read through it:
// the first record right after the header, each next one where the storage reader walks to.
#include <gtest/gtest.h>

#include <cstring>

#include "anesim_test_util.h"
#include "base/error.h"
#include "runtime/anesim/blobfile_check.h"
#include "runtime/anesim/milblob_storage.h"

namespace orion::runtime::anesim {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& b, size_t at, T v) {
  if (b.size() < at + sizeof v) b.resize(at + sizeof v, 0);
  std::memcpy(b.data() + at, &v, sizeof v);
}

// A storage header for `count` blobs, version 2.
Bytes header(uint32_t count) {
  Bytes b(64, 0);
  put<uint32_t>(b, 0, count);
  put<uint32_t>(b, 4, 2);
  return b;
}

// Writes one 64-byte metadata record at `at`.
void put_record(Bytes& b, size_t at, uint32_t dtype, uint64_t size, uint64_t data_offset, uint64_t padding_bits = 0) {
  put<uint32_t>(b, at, 0xDEADBEEF);
  put<uint32_t>(b, at + 4, dtype);
  put<uint64_t>(b, at + 8, size);
  put<uint64_t>(b, at + 16, data_offset);
  put<uint64_t>(b, at + 24, padding_bits);
  if (b.size() < at + 64) b.resize(at + 64, 0);
}

// By hand, as coremltools lays it out: header (count 2), fp16 ×3 at record 64 / data 128 (6 bytes),
// the next record at 192 (134 rounded up to 64), fp32 ×2 with data at 256.
Bytes two_blob_file() {
  Bytes b = header(2);
  put_record(b, 64, 1, 6, 128);
  for (uint8_t i = 0; i < 6; i++) put<uint8_t>(b, 128 + i, uint8_t(i + 1));
  put_record(b, 192, 2, 8, 256);
  put<float>(b, 256, 1.5f);
  put<float>(b, 260, -2.0f);
  return b;
}

std::string error_of(const Bytes& b) {
  try {
    MilBlobStorage s(b, "w.bin");
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_EQ(e.context().file, "w.bin");
    return e.what();
  }
}

void expect_error(const Bytes& b, const std::string& needle) {
  const std::string m = error_of(b);
  EXPECT_NE(m.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << m;
}

TEST(anesim_MilBlob, HandMadeFileReadsEveryRecordFromTheHeader) {
  const Bytes b = two_blob_file();
  MilBlobStorage s(b, "w.bin");
  ASSERT_EQ(s.records().size(), 2u);
  EXPECT_EQ(s.records()[0].metadata_offset, 64u);
  EXPECT_EQ(s.records()[1].metadata_offset, 192u);
  EXPECT_STREQ(milblob_dtype_name(s.at(64).dtype), "fp16");
  EXPECT_STREQ(milblob_dtype_name(s.at(192).dtype), "fp32");
  auto d = s.data(s.at(64));
  EXPECT_EQ(Bytes(d.begin(), d.end()), (Bytes{1, 2, 3, 4, 5, 6}));
  float f[2];
  std::memcpy(f, s.data(s.at(192)).data(), 8);
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.0f);
  // A header with no blobs is a valid (empty) file.
  EXPECT_TRUE(MilBlobStorage(header(0), "e.bin").records().empty());
}

TEST(anesim_MilBlob, AnOffsetThatIsNotAReachableRecordIsRefused) {
  const Bytes b = two_blob_file();
  MilBlobStorage s(b, "w.bin");
  for (uint64_t off : {0u, 128u, 256u, 320u}) {
    try {
      s.at(off);
      ADD_FAILURE() << off;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("records at: 64, 192"), std::string::npos) << e.what();
    }
  }
}

TEST(anesim_MilBlob, BrokenFilesAreInputErrors) {
  const Bytes good = two_blob_file();
  ASSERT_EQ(error_of(good), "");
  expect_error(Bytes(good.begin(), good.begin() + 40), "storage header");
  Bytes v = good;
  put<uint32_t>(v, 4, 1);
  expect_error(v, "expects version 2");
  v = good;
  put<uint32_t>(v, 64, 0xDEADBEEE);
  expect_error(v, "no blob metadata at offset 64");
  v = good;
  put<uint32_t>(v, 68, 99);
  expect_error(v, "unknown blob data type code 99");
  v = good;
  put<uint64_t>(v, 80, 96);  // data not 64-byte aligned
  expect_error(v, "not a 64-byte aligned offset");
  v = good;
  put<uint64_t>(v, 80, 64);  // data on top of its own record
  expect_error(v, "after its record");
  v = good;
  put<uint64_t>(v, 200, 1000);  // second blob's size runs past the end
  expect_error(v, "runs past the end");
  v = good;
  put<uint64_t>(v, 200, ~0ull);  // no overflow
  expect_error(v, "runs past the end");
  v = good;
  put<uint64_t>(v, 72, 5);  // 5 bytes of fp16
  expect_error(v, "whole number of fp16");
  v = good;
  put<uint64_t>(v, 88, 4);  // padding bits on a whole-byte type
  expect_error(v, "padding bits");
  v = good;
  put<uint32_t>(v, 0, 3);  // a third record would start at 320, the end of the file
  expect_error(v, "record 2 would start at 320");
  v = good;
  put<uint64_t>(v, 72, 70);  // a longer first blob moves where the reader expects record 2: 256
  v.resize(384, 0);
  expect_error(v, "no blob metadata at offset 256");
}

// The layout the compiler used to write for 128-byte alignment (M5): 64 zero bytes, then the
// record at 128 and data at 192. The storage reader looks at 64 and finds no record there.
TEST(anesim_MilBlob, ARecordBehindPaddingCannotBeReached) {
  Bytes b = header(1);
  put_record(b, 128, 1, 64, 192);
  b.resize(256, 0);
  expect_error(b, "no blob metadata at offset 64");
}

TEST(anesim_MilBlob, SubByteTypesCountTheirPaddingBits) {
  Bytes b = header(1);
  put_record(b, 64, 8, 3, 128, 4);  // int4 ×5: 3 bytes, the last half unused
  b.resize(192, 0);
  EXPECT_EQ(error_of(b), "");
  put<uint64_t>(b, 88, 8);
  expect_error(b, "padding bits");
}

// A program with two weight constants, compiled for a chip, in both weight-file layouts.
compiler::CompiledProgram two_weight_program(const std::string& chip, compiler::EmitOptions::WeightFiles files) {
  ir::Graph g("two");
  const int64_t C = 64;
  std::vector<float> w(size_t(C * C)), w2(size_t(C * C));
  for (size_t i = 0; i < w.size(); i++) w[i] = float(i % 7) * 0.01f, w2[i] = float(i % 5) * -0.02f;
  ir::Value x = g.input("x", {ir::ElemType::F16, {1, C, 1, 384}});
  ir::Value a = g.add_node(ir::Op::Conv1x1, {x, g.constant_f32("wa", {C, C, 1, 1}, w)}, {}, "a");
  ir::Value b = g.add_node(ir::Op::Conv1x1, {a, g.constant_f32("wb", {C, C, 1, 1}, w2)}, {}, "b");
  g.add_output("y", b);
  compiler::EmitOptions o;
  o.weight_files = files;
  return compiler::compile_graph(g, compiler::chip_profile(chip), o).program;
}

TEST(anesim_MilBlob, EveryChipsWeightFilesAreReadableByTheStorageLayout) {
  using WF = compiler::EmitOptions::WeightFiles;
  for (const std::string& chip : compiler::chip_names()) {
    for (WF files : {WF::PerConstant, WF::Single}) {
      SCOPED_TRACE(chip + (files == WF::Single ? " single file" : " file per constant"));
      compiler::CompiledProgram p = two_weight_program(chip, files);
      ASSERT_FALSE(p.weights.empty());
      for (const auto& [key, image] : p.weights) {
        MilBlobStorage s(image, key);
        EXPECT_EQ(s.records().front().metadata_offset, 64u);
        for (const MilBlobRecord& r : s.records())
          EXPECT_EQ(r.data_offset % uint64_t(compiler::chip_profile(chip).buffer_alignment), 0u);
      }
      EXPECT_NO_THROW(check_blobfile_constants(p.mil_text, p.weights, "two.mil"));
      DriverOptions opt;
      opt.chip = &compiler::chip_profile(chip);
      EXPECT_NO_THROW(make_anesim_driver(opt)->compile(p.mil_text, p.weights, "two"));
    }
  }
}

// anesim refuses a program whose BLOBFILE names something the storage reader does not reach, or a
// blob of another type or size, before the compiler's parser ever reads it.
TEST(anesim_MilBlob, CompileRefusesBlobfileConstantsTheStorageReaderCannotServe) {
  compiler::CompiledProgram p = two_weight_program("m4", compiler::EmitOptions::WeightFiles::Single);
  auto expect_refused = [&](const std::string& text, const WeightDict& w, const std::string& needle) {
    try {
      make_anesim_driver()->compile(text, w, "two");
      ADD_FAILURE() << "accepted; wanted " << needle;
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), DriverStatus::CompileFailed);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  std::string text = p.mil_text;
  const size_t at = text.find("offset = uint64(64)");
  ASSERT_NE(at, std::string::npos);
  expect_refused(std::string(text).replace(at, 19, "offset = uint64(128)"), p.weights, "records at: 64");
  const size_t ty = text.find("tensor<fp16, [64, 64, 1, 1]>(BLOBFILE");
  ASSERT_NE(ty, std::string::npos);
  expect_refused(std::string(text).replace(ty, 28, "tensor<fp16, [64, 32, 1, 1]>"), p.weights, "needs 4096");
  WeightDict w = p.weights;
  w.begin()->second[64] ^= 0xFF;  // the first record's sentinel
  expect_refused(text, w, "no blob metadata at offset 64");
}

}  // namespace
}  // namespace orion::runtime::anesim
