// MILBlob v2 weight files: write → read gives the same tensors, the layout is the documented one
// (header, 64-byte records, aligned data, offsets naming records — rule C8), and every kind of
// damage is an Input error naming the file, the field and the byte offset.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/error.h"
#include "base/file.h"
#include "compiler/blob/blob_file.h"
#include "support.h"

namespace orion::compiler::blob {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

template <typename T>
T get(const std::vector<uint8_t>& img, size_t at) {
  T v;
  std::memcpy(&v, img.data() + at, sizeof(T));
  return v;
}

template <typename T>
void set(std::vector<uint8_t>& img, size_t at, T v) {
  std::memcpy(img.data() + at, &v, sizeof(T));
}

// The message of the Input error that reading `img` raises ("" when it reads fine).
std::string read_error(const std::vector<uint8_t>& img) {
  try {
    BlobFile f(img, "w.bin");
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_EQ(e.context().file, "w.bin");
    return e.what();
  }
}

TEST(Blob, OneFp16BlobHasTheDocumentedLayout) {
  auto data = random_bytes(768 * 2, 1);
  std::vector<uint64_t> offs;
  auto img = write_blob_file({{BlobDType::F16, data.data(), data.size()}}, 64, &offs);
  ASSERT_EQ(offs, std::vector<uint64_t>{64});  // C8: the first record is at 64
  EXPECT_EQ(img.size(), 128u + 1536u);
  EXPECT_EQ(get<uint32_t>(img, 0), 1u);            // count
  EXPECT_EQ(get<uint32_t>(img, 4), 2u);            // version
  EXPECT_EQ(get<uint32_t>(img, 64), 0xDEADBEEFu);  // sentinel
  EXPECT_EQ(get<uint32_t>(img, 68), 1u);           // fp16
  EXPECT_EQ(get<uint64_t>(img, 72), 1536u);        // size_in_bytes
  EXPECT_EQ(get<uint64_t>(img, 80), 128u);         // data_offset (absolute)
  EXPECT_EQ(std::memcmp(img.data() + 128, data.data(), data.size()), 0);
  BlobFile f(img, "w.bin");
  ASSERT_EQ(f.entries().size(), 1u);
  EXPECT_EQ(f.at(64).dtype, BlobDType::F16);
  EXPECT_EQ(f.copy(f.at(64)), data);
}

TEST(Blob, ManyBlobsOfEveryDtypeRoundTrip) {
  // fp16, fp32, bf16, int8, uint8, int32 with sizes that are not multiples of 64.
  const std::vector<std::pair<BlobDType, size_t>> kinds = {{BlobDType::F16, 2 * 33},   {BlobDType::F32, 4 * 7},
                                                           {BlobDType::BF16, 2 * 100}, {BlobDType::I8, 1},
                                                           {BlobDType::U8, 65},        {BlobDType::I32, 4 * 300}};
  std::vector<std::vector<uint8_t>> datas;
  std::vector<BlobIn> in;
  for (size_t i = 0; i < kinds.size(); i++) datas.push_back(random_bytes(kinds[i].second, uint32_t(i + 7)));
  for (size_t i = 0; i < kinds.size(); i++) in.push_back({kinds[i].first, datas[i].data(), datas[i].size()});
  for (size_t align : {64u, 128u}) {
    std::vector<uint64_t> offs;
    auto img = write_blob_file(in, align, &offs);
    EXPECT_EQ(img.size() % align, 0u);
    BlobFile f(img, "w.bin");
    ASSERT_EQ(f.entries().size(), kinds.size());
    for (size_t i = 0; i < kinds.size(); i++) {
      const BlobEntry& e = f.at(offs[i]);
      EXPECT_EQ(e.record_offset % 64, 0u) << i;
      EXPECT_EQ(e.data_offset % align, 0u) << i;
      EXPECT_EQ(e.dtype, kinds[i].first);
      EXPECT_EQ(f.copy(e), datas[i]) << "blob " << i << " alignment " << align;
    }
    // The first record is right after the header whatever the data alignment: coremltools'
    // storage reader looks for it there (a chip wanting 128-byte data gets it at 128 all the same).
    EXPECT_EQ(offs[0], 64u);
    EXPECT_EQ(f.at(offs[0]).data_offset, 128u);
    // Each next record is at the previous data's end rounded up to 64, where the reader walks.
    for (size_t i = 1; i < kinds.size(); i++)
      EXPECT_EQ(offs[i], (f.at(offs[i - 1]).data_offset + datas[i - 1].size() + 63) / 64 * 64) << i;
  }
}

TEST(Blob, DtypeCodesAreCoremltools) {
  EXPECT_EQ(uint32_t(BlobDType::F16), 1u);
  EXPECT_EQ(uint32_t(BlobDType::F32), 2u);
  EXPECT_EQ(uint32_t(BlobDType::U8), 3u);
  EXPECT_EQ(uint32_t(BlobDType::I8), 4u);
  EXPECT_EQ(uint32_t(BlobDType::BF16), 5u);
  EXPECT_EQ(uint32_t(BlobDType::I32), 14u);
  EXPECT_EQ(uint32_t(BlobDType::U32), 15u);
  EXPECT_EQ(blob_dtype_from_code(9), std::nullopt);
  EXPECT_EQ(blob_dtype_of(ir::ElemType::F32), BlobDType::F32);
  EXPECT_EQ(blob_dtype_of(ir::ElemType::Bool), std::nullopt);
}

TEST(Blob, EmptyFileWithNoBlobsIsValid) {
  auto img = write_blob_file({});
  EXPECT_EQ(img.size(), 64u);
  EXPECT_TRUE(BlobFile(img, "w.bin").entries().empty());
}

TEST(Blob, OffsetNotNamingARecordIsRuleC8) {
  auto data = random_bytes(256, 3);
  auto img = write_blob_file({{BlobDType::F16, data.data(), data.size()}});
  BlobFile f(img, "w.bin");
  try {
    f.at(128);  // the data, not the record
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("C8"), std::string::npos) << m;
    EXPECT_NE(m.find("records are at: 64"), std::string::npos) << m;
    EXPECT_EQ(e.context().offset, 128);
  }
  EXPECT_THROW(f.at(0), Error);
}

TEST(Blob, MalformedFilesAreInputErrors) {
  auto data = random_bytes(200, 4);
  auto good = write_blob_file({{BlobDType::F32, data.data(), data.size()}, {BlobDType::F16, data.data(), 100}});
  ASSERT_EQ(read_error(good), "");
  auto expect = [&](std::vector<uint8_t> img, const std::string& needle) {
    std::string m = read_error(img);
    EXPECT_NE(m.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << m;
  };
  expect(std::vector<uint8_t>(good.begin(), good.begin() + 6), "field 'version'");  // truncated header
  auto v = good;
  set<uint32_t>(v, 4, 1);
  expect(v, "storage version is 1");
  v = good;
  set<uint32_t>(v, 64, 0xDEADBEEE);
  expect(v, "expected metadata sentinel 0xDEADBEEF");
  v = good;
  set<uint32_t>(v, 68, 9);
  expect(v, "unknown dtype code 9");
  v = good;
  set<uint64_t>(v, 72, 1u << 20);
  expect(v, "runs past the end");
  v = good;
  set<uint64_t>(v, 72, ~0ull);
  expect(v, "runs past the end");  // no overflow
  v = good;
  set<uint64_t>(v, 80, 100);
  expect(v, "64-byte aligned");
  v = good;
  set<uint64_t>(v, 80, 0);
  expect(v, "after its record");
  v = good;
  set<uint64_t>(v, 72, 198);
  expect(v, "whole number of elements");  // fp32 needs 4n
  v = good;
  set<uint32_t>(v, 0, 3);
  expect(v, "found only 2");
  v = good;
  set<uint32_t>(v, 0, 1);
  expect(v, "more blobs than the header's count");
  v = good;
  set<uint32_t>(v, 0, 0xFFFFFFFF);
  expect(v, "hold at most");
  v = good;
  v[20] = 1;
  expect(v, "reserved header bytes");
  v = good;
  v[64 + 40] = 1;
  expect(v, "reserved record bytes");
  v = good;
  v.push_back(7);
  expect(v, "after the last blob");
  v = std::vector<uint8_t>(good.begin(), good.end() - 64);
  expect(v, "runs past the end");  // truncated data
}

TEST(Blob, ARecordBehindPaddingIsUnreachableAndRefused) {
  // The layout the writer once produced for 128-byte alignment: header, 64 zero bytes, the record
  // at 128, data at 192. The storage reader looks for the first record at 64 and finds zeros.
  std::vector<uint8_t> img(192 + 64, 0);
  set<uint32_t>(img, 0, 1);
  set<uint32_t>(img, 4, 2);
  set<uint32_t>(img, 128, 0xDEADBEEF);
  set<uint32_t>(img, 132, 1);
  set<uint64_t>(img, 136, 64);
  set<uint64_t>(img, 144, 192);
  EXPECT_NE(read_error(img).find("found 0x00000000"), std::string::npos) << read_error(img);
}

TEST(Blob, EveryTruncationAndByteFlipFailsCleanly) {
  // Never a crash: every prefix of a valid file, and every single-byte corruption of its metadata.
  auto data = random_bytes(130, 5);
  auto good = write_blob_file({{BlobDType::I8, data.data(), 130}, {BlobDType::U8, data.data(), 3}});
  for (size_t n = 0; n < good.size(); n++) read_error(std::vector<uint8_t>(good.begin(), good.begin() + long(n)));
  for (size_t i = 0; i < 128; i++) {
    auto v = good;
    v[i] ^= 0x5A;
    read_error(v);
  }
}

TEST(Blob, SaveWritesTheImageAtomically) {
  auto data = random_bytes(64, 6);
  auto img = write_blob_file({{BlobDType::F16, data.data(), data.size()}});
  std::string path = test::temp_dir() + "/w.bin";
  save_blob_file(path, img);
  auto f = MappedFile::open(path);
  EXPECT_EQ(std::vector<uint8_t>(f->data(), f->data() + f->size()), img);
}

}  // namespace
}  // namespace orion::compiler::blob
