#!/usr/bin/env bash
# Installs the Debian 12 packages Orion builds with. Idempotent: when everything is present it
# only checks and returns in about a second. Needs root (or sudo) the first time.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-dev          # reference GEMM that bench_kernels compares against (not linked into orion)
  libdnnl-dev              # oneDNN: prompt-sized GEMMs (runtime/cpu/gemm_library.cpp; optional, ORION_ONEDNN)
  ocl-icd-opencl-dev       # oneDNN's CMake config requires OpenCL's headers (a Recommends of libdnnl-dev)
  nlohmann-json3-dev       # JSON (safetensors headers, config.json, tokenizer.json)
  libcli11-dev libfmt-dev  # command line, formatting
  libsentencepiece-dev     # SentencePiece tokenizers
  libpcre2-dev libutf8proc-dev  # tokenizer.json: pre-tokenizer regexes (PCRE2) and NFC normalization
  libcurl4-openssl-dev     # HTTP(S) downloads: orion data fetch
  openmpi-bin libopenmpi-dev  # data-parallel training: mpirun -np N orion train (docs/distributed.md)
  libgtest-dev libgmock-dev libbenchmark-dev  # tests and benchmarks
  python3-jinja2           # chat-template goldens: the test re-renders them (tests/model/chat_goldens/)
  clang libgnustep-base-dev  # CI syntax check of the Apple driver's .mm (scripts/check_ane_driver_syntax.sh)
  libobjc-12-dev           # GCC's Objective-C runtime: the Apple driver runs in ctest against a fake framework (tests/ane_driver/)
  libclang-rt-14-dev libomp-dev  # sanitizer + libFuzzer runtimes and OpenMP for clang (scripts/sanitize.sh, fuzz.sh)
  libcpp-httplib-dev       # HTTP server and test client: orion serve (src/serve/, tests/serve/)
  chromium                 # headless browser that tests orion serve's web page (tests/serve/test_web_page.cpp)
  python3-numpy            # independent references the tests run (tests/model/hf_reference/, gguf_reference/)
  pybind11-dev python3-dev # the Python package `import orion` (python/; built when pybind11 is found)
  python3-pytest           # its tests (tests/python/, ctest python.pytest)
  python3-torch            # PyTorch interop and the gradient check against torch autograd (optional at import)
  python3-venv             # scripts/install-python.sh --venv DIR
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
