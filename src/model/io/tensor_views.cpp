// Tensor views over mapped files, the copies that cannot be views (transposes, the Hugging Face
// q/k permutation, misaligned data), and dtype-converting tensor writes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "model/io/io_internal.h"

namespace orion::io {

namespace {
// Where a view may start. f32 on a 64-byte line: the kernels load 16 floats (64 bytes) at a time,
// and from anywhere else each load straddles two lines — a llama2.c .bin puts every matrix 28 bytes
// past one, and Stories110M decoded from it at 75 tok/s, 67–69% of its bound, against 107–126 tok/s
// and 89–91% for the same shapes on a line (prefill 918–969 against 1,075–1,223 tok/s; Zen 5 VM,
// bench/RESULTS.md). f16 and bf16 need only their element: 16 of them are 32 bytes, and a GGUF
// file's 32-byte alignment decoded no slower than a line's. q8_0 blocks are 34 bytes: never on one.
size_t view_alignment(DType dtype) { return dtype == DType::F32 ? 64 : dtype_alignment(dtype); }
}  // namespace

Tensor view_or_copy(ModelWeights& w, const void* data, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape = std::move(shape);
  if (reinterpret_cast<uintptr_t>(data) % view_alignment(dtype) == 0) return t;
  Tensor copy = w.copy_as(t, dtype);  // a same-dtype copy into 64-byte-aligned memory
  release_mapped_pages(data, copy.nbytes());  // the copy is what runs: the file's pages need not stay resident
  return copy;
}

Tensor vector_f32(ModelWeights& w, const void* data, DType dtype, int64_t n) {
  Tensor t = view_or_copy(w, data, dtype, {n});
  return t.dtype == DType::F32 ? t : w.copy_as(t, DType::F32);
}

namespace {
// dst[c][r] = src[r][c] for a [rows, cols] matrix of E-sized elements, in 32 × 32 tiles so that
// both the reads and the writes stay within a few cache lines.
template <typename E>
void transpose_tiles(const E* src, E* dst, int64_t rows, int64_t cols) {
  constexpr int64_t B = 32;
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 18))
  for (int64_t r0 = 0; r0 < rows; r0 += B)
    for (int64_t c0 = 0; c0 < cols; c0 += B)
      for (int64_t r = r0; r < std::min(rows, r0 + B); r++)
        for (int64_t c = c0; c < std::min(cols, c0 + B); c++) dst[c * rows + r] = src[r * cols + c];
}
}  // namespace

Tensor transposed(ModelWeights& w, const Tensor& t) {
  ORION_CHECK(t.shape.size() == 2 && t.dtype != DType::Q8_0, "transpose of a {}-D {} tensor", t.shape.size(),
              dtype_name(t.dtype));
  const int64_t rows = t.shape[0], cols = t.shape[1];
  void* p;
  Tensor out = w.alloc_tensor({cols, rows}, t.dtype, &p);
  if (dtype_size(t.dtype) == 4) transpose_tiles(static_cast<const uint32_t*>(t.data), static_cast<uint32_t*>(p), rows, cols);
  else transpose_tiles(static_cast<const uint16_t*>(t.data), static_cast<uint16_t*>(p), rows, cols);
  return out;
}

Tensor row_slice(const Tensor& t, int64_t begin, int64_t count) {
  ORION_CHECK(t.shape.size() == 2 && begin >= 0 && begin + count <= t.shape[0], "bad row slice");
  Tensor s = t;
  s.shape = {count, t.shape[1]};
  s.data = static_cast<const uint8_t*>(t.data) + size_t(begin) * dtype_bytes(t.dtype, size_t(t.shape[1]));
  return s;
}

Tensor vec_slice(const Tensor& t, int64_t begin, int64_t count) {
  ORION_CHECK(t.shape.size() == 1 && begin >= 0 && begin + count <= t.shape[0], "bad vector slice");
  Tensor s = t;
  s.shape = {count};
  s.data = static_cast<const uint8_t*>(t.data) + dtype_bytes(t.dtype, size_t(begin));
  return s;
}

namespace {
// Copies rows between the two layouts of one head-blocked matrix: for every head h, pair index i
// and member j, row (h·HS + 2i + j) of the interleaved layout ⇄ row (h·HS + j·HS/2 + i) of the
// rotate-half layout.
Tensor permute_rows(ModelWeights& w, const Tensor& t, int n_heads, bool to_hf) {
  ORION_CHECK(t.shape.size() == 2 && n_heads > 0 && t.shape[0] % (2 * n_heads) == 0, "q/k permutation of [{}] with {} heads",
              fmt::join(t.shape, ", "), n_heads);
  const int64_t HS = t.shape[0] / n_heads, half = HS / 2;
  const size_t row_bytes = dtype_bytes(t.dtype, size_t(t.shape[1]));
  void* p;
  Tensor out = w.alloc_tensor(t.shape, t.dtype, &p);
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  uint8_t* dst = static_cast<uint8_t*>(p);
  for (int64_t h = 0; h < n_heads; h++)
    for (int64_t i = 0; i < half; i++)
      for (int64_t j = 0; j < 2; j++) {
        int64_t interleaved = h * HS + 2 * i + j, rotate_half = h * HS + j * half + i;
        int64_t from = to_hf ? interleaved : rotate_half, to = to_hf ? rotate_half : interleaved;
        std::memcpy(dst + size_t(to) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
      }
  return out;
}
}  // namespace

Tensor hf_permute_rows(ModelWeights& w, const Tensor& t, int n_heads) { return permute_rows(w, t, n_heads, true); }
Tensor hf_unpermute_rows(ModelWeights& w, const Tensor& t, int n_heads) { return permute_rows(w, t, n_heads, false); }

namespace {
// A vector as a one-column matrix, so that its elements move as permute_rows moves rows.
Tensor permute_vector(ModelWeights& w, const Tensor& v, int n_heads, bool to_hf) {
  ORION_CHECK(v.shape.size() == 1, "q/k vector permutation of a {}-D tensor", v.shape.size());
  Tensor column = v;
  column.shape = {v.shape[0], 1};
  Tensor out = permute_rows(w, column, n_heads, to_hf);
  out.shape = v.shape;
  return out;
}
}  // namespace

Tensor hf_permute_vector(ModelWeights& w, const Tensor& v, int n_heads) { return permute_vector(w, v, n_heads, true); }
Tensor hf_unpermute_vector(ModelWeights& w, const Tensor& v, int n_heads) { return permute_vector(w, v, n_heads, false); }

void write_as(FileWriter& out, const Tensor& t, DType dtype) {
  const size_t n = size_t(t.numel());
  if (t.dtype == dtype) {
    out.write(t.data, dtype_bytes(dtype, n));
    return;
  }
  // Convert in chunks of 1M elements so that writing a large model needs no second copy of it.
  constexpr size_t chunk = size_t(1) << 20;
  std::vector<uint8_t> buf(dtype_bytes(dtype, std::min(n, chunk)));
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (size_t at = 0; at < n; at += chunk) {
    size_t k = std::min(chunk, n - at);
    convert_dtype(src + dtype_bytes(t.dtype, at), t.dtype, buf.data(), dtype, k);  // chunk: whole q8_0 blocks
    out.write(buf.data(), dtype_bytes(dtype, k));
  }
}

void rope_tables(const ModelConfig& c, std::vector<float>* real, std::vector<float>* imag) {
  const int HS = c.head_dim(), half = HS / 2;
  real->assign(size_t(c.seq_len) * half, 0.0f);
  imag->assign(size_t(c.seq_len) * half, 0.0f);
  for (int t = 0; t < c.seq_len; t++)
    for (int i = 0; i < half; i++) {
      // Computed in fp32 like PyTorch's float32 tables (llama2.c's model.py precompute_freqs_cis).
      float freq = 1.0f / std::pow(c.rope_theta, float(2 * i) / float(HS));
      float angle = float(t) * freq;
      (*real)[size_t(t) * half + i] = std::cos(angle);
      (*imag)[size_t(t) * half + i] = std::sin(angle);
    }
}

}  // namespace orion::io
