#!/usr/bin/env bash
# Sanitizers: build the CPU kernel library with AddressSanitizer + UndefinedBehaviorSanitizer
# into its own build directory (never the installed library) and run the kernel-level
# driver (tests/_sanitize_driver.py) on it: every entry point, dtype, index dtype and
# shape class against the numpy oracle, the error paths, the multi-thread path and
# concurrent calls. Exits non-zero on any sanitizer finding or failed check, and when the
# toolchain (g++, libasan, libubsan) is missing: this never skips.
#
# Two builds of the same source:
#   portable  exactly: g++ -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined
#             -fno-omit-frame-pointer -std=c++17 -fPIC -shared -Ikernels/include ... -pthread
#   native    the same plus -march=native (on x86-64 the F16C float16 conversion paths, which
#             the x86-64-v3 and -v4 variants that `pip install .` builds take too)
# A canary (a tiny library with a deliberate heap overflow and a signed overflow, built
# with the same flags) first proves that both sanitizers are live in this setup.
#
# Environment:
#   PYTHON                      interpreter with numpy (default: python3); MindSpore not needed
#   CXX                         C++ compiler (default: g++)
#   MS_SCATTER_SANITIZE_DIR     build directory (default: build/sanitize)
#   MS_SCATTER_SANITIZE_BUILDS  which builds to run (default: "portable native")
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
CXX=${CXX:-g++}
BUILD=${MS_SCATTER_SANITIZE_DIR:-build/sanitize}
BUILDS=${MS_SCATTER_SANITIZE_BUILDS:-portable native}
FLAGS=(-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
       -std=c++17 -fPIC -shared)

die() { echo "sanitize.sh: $*" >&2; exit 2; }

command -v "$CXX" >/dev/null 2>&1 || die "no C++ compiler '$CXX' (install g++)"
ASAN_LIB=$("$CXX" -print-file-name=libasan.so)
UBSAN_LIB=$("$CXX" -print-file-name=libubsan.so)
# -print-file-name echoes the bare name back when the library is not installed
[[ "$ASAN_LIB" == /* && -e "$ASAN_LIB" ]] || die "libasan.so not found by $CXX (install libasan / gcc's sanitizer runtime)"
[[ "$UBSAN_LIB" == /* && -e "$UBSAN_LIB" ]] || die "libubsan.so not found by $CXX (install libubsan)"
"$PY" -c "import numpy" 2>/dev/null || die "'$PY' cannot import numpy (set PYTHON to the project's interpreter)"
mkdir -p "$BUILD"

export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export MS_SCATTER_QUIET=1
PRELOAD="$ASAN_LIB:$UBSAN_LIB"
SOURCES=(kernels/cpu/scatter_cpu.cc kernels/cpu/*.h kernels/include/ms_scatter/*.h)

# build NAME EXTRA_FLAGS...: compile into $BUILD unless the library there is newer than every
# source and was built with the same command.
build() {
  local name=$1; shift
  local out="$BUILD/libms_scatter_cpu_asan${name:+_$name}.so"
  [[ $name == portable ]] && out="$BUILD/libms_scatter_cpu_asan.so"
  local cmd=("$CXX" "${FLAGS[@]}" "$@" -Ikernels/include kernels/cpu/scatter_cpu.cc -o "$out" -pthread)
  local stamp="$out.cmd"
  local fresh=1
  if [[ -e "$out" && -e "$stamp" && "$(cat "$stamp")" == "${cmd[*]}" ]]; then
    for f in "${SOURCES[@]}"; do [[ "$f" -nt "$out" ]] && fresh=0; done
  else
    fresh=0
  fi
  if (( fresh )); then
    echo "+ (up to date) $out"
  else
    echo "+ ${cmd[*]}"
    rm -f "$stamp"
    "${cmd[@]}"
    echo "${cmd[*]}" > "$stamp"
  fi
}

t0=$SECONDS
# canary: the sanitizers must catch deliberate errors in this setup
cat > "$BUILD/canary.cc" <<'EOF'
extern "C" int canary_heap_overflow(int n) { int *p = new int[n]; int v = p[n]; delete[] p; return v; }
extern "C" int canary_signed_overflow(int a) { volatile int one = 1; return a + one; }
EOF
"$CXX" "${FLAGS[@]}" "$BUILD/canary.cc" -o "$BUILD/libcanary.so"
for kind in asan ubsan; do
  # (in a subshell with stderr discarded: the shell's own "Aborted" notice is expected here)
  if (LD_PRELOAD="$PRELOAD" "$PY" tests/_sanitize_driver.py --canary $kind --canary-library "$BUILD/libcanary.so" \
        > "$BUILD/canary_$kind.log" 2>&1; exit $?) 2>/dev/null; then
    cat "$BUILD/canary_$kind.log" >&2
    die "canary: $kind did not stop a deliberate error: the sanitizer is not active"
  fi
  want=$([[ $kind == asan ]] && echo "heap-buffer-overflow" || echo "signed integer overflow")
  grep -q "$want" "$BUILD/canary_$kind.log" || { cat "$BUILD/canary_$kind.log" >&2; die "canary: no '$want' report"; }
  echo "canary: $kind caught the deliberate $want (expected)"
done

# the builds (in parallel: the compile dominates a cold run)
pids=()
for b in $BUILDS; do
  case $b in
    portable) build portable & pids+=($!) ;;
    native) build native -march=native & pids+=($!) ;;
    *) die "unknown build '$b'" ;;
  esac
done
for p in "${pids[@]}"; do wait "$p" || die "a sanitizer build failed"; done
echo "builds ready after $((SECONDS - t0)) s"

status=0
for b in $BUILDS; do
  lib="$BUILD/libms_scatter_cpu_asan.so"
  [[ $b == native ]] && lib="$BUILD/libms_scatter_cpu_asan_native.so"
  log="$BUILD/driver_$b.log"
  echo "+ LD_PRELOAD=$PRELOAD $PY tests/_sanitize_driver.py --library $lib"
  set +e
  LD_PRELOAD="$PRELOAD" "$PY" tests/_sanitize_driver.py --library "$lib" > "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
  if (( rc != 0 )); then
    echo "sanitize.sh: the $b driver run failed with status $rc" >&2
    status=1
  elif grep -q -E "Sanitizer|runtime error:" "$log"; then
    echo "sanitize.sh: sanitizer output in the $b run" >&2
    status=1
  elif ! grep -q "sanitize driver: .* 0 failures" "$log"; then
    echo "sanitize.sh: the $b driver did not report its summary" >&2
    status=1
  fi
done
echo "sanitize.sh: $([[ $status == 0 ]] && echo OK || echo FAILED) ($BUILDS) in $((SECONDS - t0)) s"
exit $status
