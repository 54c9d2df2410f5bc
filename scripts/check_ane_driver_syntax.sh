#!/usr/bin/env bash
# Compiles the Apple driver's Objective-C++ half (src/runtime/ane/ane_driver.mm) for syntax and types
# against GNUstep's Foundation headers, so it cannot rot on machines without a Mac.
# Run by ctest as runtime.ane_driver_syntax_anesim; needs clang and libgnustep-base-dev
# (scripts/setup.sh installs both) and fails — never skips — without them.
#
# Two passes, both -fsyntax-only -Werror (an unknown selector is only a warning in Objective-C):
#   1. manual reference counting: every message send, type and declaration checked;
#   2. ARC (-fobjc-arc, as the macOS build compiles it): bridging casts and ownership checked. GCC's
#      libobjc objc/runtime.h (the runtime Debian's GNUstep uses) dereferences `id` in an inline
#      function, which clang rejects under ARC; errors located in that one header are ignored, any
#      other diagnostic fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${1:-$root/src/runtime/ane/ane_driver.mm}"  # another file: to test this check itself
cxx="${ORION_OBJCXX:-clang++}"

fail() { echo "check_ane_driver_syntax: $*" >&2; exit 1; }
command -v "$cxx" >/dev/null || fail "$cxx not found (install clang: scripts/setup.sh)"
command -v gnustep-config >/dev/null || fail "gnustep-config not found (install libgnustep-base-dev: scripts/setup.sh)"
[ -f "$src" ] || fail "missing $src"

# GNUstep's include folders and defines, without its build-only flags (-MMD, -g, -O2, -I.).
gs_flags=()
for f in $(gnustep-config --objc-flags); do
  case "$f" in
    -I.) ;;
    -I*) gs_flags+=("-isystem" "${f#-I}") ;;
    -D*|-fconstant-string-class=*) gs_flags+=("$f") ;;
  esac
done
# GCC's libobjc headers (objc/objc.h, objc/runtime.h), which GNUstep's headers include.
libobjc_inc="$(dirname "$(dirname "$(gcc -print-file-name=include/objc/objc.h)")")"
[ -f "$libobjc_inc/objc/objc.h" ] || fail "objc/objc.h of GCC's libobjc not found (install libgnustep-base-dev)"
[ -f "$(find /usr/include/GNUstep /usr/local/include/GNUstep -name Foundation.h -path '*Foundation/*' 2>/dev/null | head -1)" ] ||
  fail "GNUstep Foundation headers not found (install libgnustep-base-dev: scripts/setup.sh)"

common=(-std=c++20 -fsyntax-only -x objective-c++ -fobjc-runtime=gnustep-2.0 -fobjc-exceptions
        -ferror-limit=0 -Wall -Wextra -Wno-unused-parameter -Werror
        "${gs_flags[@]}" -isystem "$libobjc_inc"
        -I "$root/src" $(pkg-config --cflags fmt 2>/dev/null || true))

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# Pass 1: manual reference counting.
if ! "$cxx" "${common[@]}" "$src" >"$log" 2>&1; then
  cat "$log" >&2
  fail "ane_driver.mm does not compile against GNUstep (manual reference counting)"
fi

# Pass 2: ARC. Keep every "error:"/"warning:" line that is not in libobjc's runtime.h.
"$cxx" "${common[@]}" -fobjc-arc "$src" >"$log" 2>&1 || true
ours="$(grep -E '(error|warning):' "$log" | grep -v "^$libobjc_inc/objc/runtime.h:" | grep -v ' errors\? generated\.$' || true)"
if [ -n "$ours" ]; then
  cat "$log" >&2
  fail "ane_driver.mm does not compile against GNUstep under ARC"
fi

echo "check_ane_driver_syntax: ane_driver.mm compiles against GNUstep Foundation (MRC and ARC)"
