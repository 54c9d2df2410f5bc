// What the CPU offers that the kernels look for, and the path each kernel family takes on this
// machine (`orion doctor`). Read from the switches the kernels themselves use.
#pragma once
#include <string>
#include <vector>

namespace orion::cpu {

// avx2, fma, f16c, avx512f/bw/vl/dq, avx512_vnni, avx_vnni (CPUID; dispatch.cpp).
struct CpuFeature {
  std::string name;
  bool present;
};
std::vector<CpuFeature> cpu_features();

// Per kernel family, the path the dispatch picked ("avx512", "avx2 + avx_vnni", "portable", …).
struct KernelPath {
  std::string family, path;
};
std::vector<KernelPath> kernel_paths();  // kernel_paths.cpp

}  // namespace orion::cpu
