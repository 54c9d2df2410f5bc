#!/usr/bin/env bash
# Installs the Python package `orion` from this checkout's build, offline (Debian packages only:
# python3-numpy, pybind11-dev; scripts/setup.sh). Builds it first when build/python/orion is missing.
#
#   scripts/install-python.sh                 into the site-packages of /usr/bin/python3 (may need sudo)
#   scripts/install-python.sh --venv DIR      into a virtual environment, created when missing with
#                                             --system-site-packages (NumPy and torch from Debian)
#   scripts/install-python.sh --build DIR     use another build folder (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="" build="build"
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "install-python: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
python=/usr/bin/python3
if [ -n "$venv" ]; then
  [ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv"
  python="$venv/bin/python"
fi
if ! ls "$build"/python/orion/_core*.so >/dev/null 2>&1; then
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" --target orion_python orion
fi
site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
mkdir -p "$site"
rm -rf "$site/orion"
cp -r "$build/python/orion" "$site/orion"
"$python" -c 'import orion; print("installed orion", orion.__version__, "into", orion.__path__[0])'
