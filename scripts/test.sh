#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test (the README's second command, and CI's).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest -j"$(nproc)" --output-on-failure --timeout 900
