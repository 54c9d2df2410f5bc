// anesim's column sharing: a program that computes every sequence column on its own runs each
// distinct column once.
//
// Why it is exact: a kernel reads and writes [1, C, 1, S] buffers whose S columns are sequence
// positions. In a position-wise program (projections, norms over channels, GELU, residual adds —
// decode and FFN kernels) column s of every result depends on column s of the inputs alone, and
// anesim computes each element by the same sequence of roundings whatever the number of columns
// (anesim_gemm.h sums every output in ascending k; the elementwise ops and the channel reductions
// are per element / per column). So inputs whose columns are equal bit for bit give equal output
// columns, and computing one representative of each class of equal columns, then copying it to the
// others, writes the very bytes the full program would. A decode token sits in column 0 of a
// 32-column buffer (C7) whose 31 zero columns are all alike: two columns instead of 32. The ANE
// itself computes all 32; anesim's timing model still charges all of them (anesim_timing.h).
//
// Which programs qualify is decided once per load from the graph (column_layout); anything it does
// not recognise as position-wise (matmul, slices, attention, softmax or a reduction along the
// columns) makes the program run whole, as before.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace orion::runtime::anesim {

// Which values of a program carry its columns: their last axis has the inputs' S columns and
// column s depends on the inputs' column s alone. The other values (constants, and what is
// computed from constants only) are the same for every column.
struct ColumnLayout {
  int64_t S = 0;              // the columns; 0 when the program is not position-wise
  std::vector<bool> carries;  // by node index
  bool position_wise() const { return S > 1; }
};

// The layout of g's live nodes, checked op by op: S = 0 unless every op that reads a
// column-carrying value is one that keeps the columns apart. (An output carries the columns or is
// the same for all of them; either is written correctly.)
ColumnLayout column_layout(const ir::Graph& g);

// A [rows, N] row-major matrix of 2- or 4-byte elements with row stride ld, compared column by
// column with the others of a list (column n of the list = column n of each matrix, together).
struct ColumnSource {
  const void* data;
  int64_t rows, ld;
  int elem_bytes;
};

// For every column n < N, the first column whose bits equal n's in every source (n itself when no
// earlier one does), found by hashing the columns and comparing the candidates.
std::vector<int> first_equal_columns(const std::vector<ColumnSource>& sources, int N);

// The classes of equal columns: `distinct` lists one representative of each (ascending), and
// column n of the full width is column slot[n] of the narrow one.
struct ColumnClasses {
  std::vector<int> distinct, slot;
  ColumnClasses() = default;
  explicit ColumnClasses(const std::vector<int>& first);
  int width() const { return int(distinct.size()); }
};

// dst [rows, U] = the distinct columns of src [rows, ≥ S] (row stride ld): narrowing an operand.
template <typename T>
void gather_columns(T* dst, const T* src, int64_t rows, int64_t ld, const ColumnClasses& c) {
  const int64_t U = c.width();
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < U; j++) dst[r * U + j] = src[r * ld + c.distinct[size_t(j)]];
}
// dst [rows, S] = column slot[n] of src [rows, U] for every n < S: widening a result.
template <typename T>
void scatter_columns(T* dst, const T* src, int64_t rows, const ColumnClasses& c) {
  const int64_t U = c.width(), S = int64_t(c.slot.size());
  for (int64_t r = 0; r < rows; r++)
    for (int64_t n = 0; n < S; n++) dst[r * S + n] = src[r * U + c.slot[size_t(n)]];
}

}  // namespace orion::runtime::anesim
