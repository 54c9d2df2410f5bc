// Which path each CPU kernel family takes on this machine (`orion doctor`): read from the same
// switches the kernels use, so the answer is what runs, not what the CPU could do.
#include "runtime/cpu/kernel_paths.h"

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/kernels_q8.h"
#include "runtime/cpu/train_kernels.h"

namespace orion::cpu {
namespace {

// q8_0 blocks: the int8 dot product of the active table, with VNNI's vpdpbusd when it is on.
std::string q8_path() {
  switch (active_isa()) {
    case Isa::Avx512: return avx512_vnni_on() ? "avx512 + avx512_vnni" : "avx512";
    case Isa::Avx2: return avx2_vnni_on() ? "avx2 + avx_vnni" : "avx2";
    case Isa::Generic: break;
  }
  return "generic";
}

}  // namespace

std::vector<KernelPath> kernel_paths() {
  const std::string isa = isa_name(active_isa());
  // The training step's vector kernels: e^x and tanh from libmvec when it is linked (vector_math.h).
#if ORION_HAVE_LIBMVEC
  const std::string mvec = " + libmvec";
#else
  const std::string mvec = "";
#endif
  return {
      {"matvec (decode)", isa + (matvec_order() == MatvecOrder::RowByRow ? ", row by row" : ", 8-row blocks + prefetch")},
      {"gemm (prefill)", isa},
      {"f16/bf16 widening", isa},
      {"attention dot/axpy", isa},
      {"q8_0 dot", q8_path()},
      {"training gemm (backward accumulate)", gemm_acc_available() ? isa : "portable"},
      {"training elementwise (AdamW, GELU, SwiGLU, cross-entropy)", train_simd_available() ? isa + mvec : "portable"},
      {"training attention", attention_simd_available(1) ? isa + mvec : "portable"},
  };
}

}  // namespace orion::cpu
