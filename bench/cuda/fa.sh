#!/bin/bash
# Flash attention on the device in one call: CUDA build (kernel tests only),
# the kernel tests (attention against the double-precision reference), then
# bench_attn (split kernel vs the flash configurations, TFLOP/s).
#   bench/cuda/fa.sh [tokens]     (logs in $OUT, default /tmp/wick-fa-out)
# To skip the device build (~1 min of device time), build test_cuda_kernels
# and bench_attn here (the gcc line below, with build-fa for $B), copy both
# into build-fa-bin/ and carry that folder with .debs.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/wick-fa-out}
mkdir -p "$OUT"
. bench/cuda/env.sh
B=${WICK_BUILD:-build-dev-fa}
NP=$(nproc)
T0=$(date +%s)
# Binaries built on the calling machine may come along in build-fa-bin/
# (git-ignored, carried); they are used when their libraries resolve here.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if [ -x build-fa-bin/test_cuda_kernels ] && [ -x build-fa-bin/bench_attn ] &&
   ! ldd build-fa-bin/test_cuda_kernels build-fa-bin/bench_attn | grep -q "not found"; then
  B=build-fa-bin
  echo "== carried binaries"
else
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
  cmake --build $B --target test_cuda_kernels -j"$NP" > "$OUT/build.log" 2>&1 ||
    { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
  gcc -std=c11 -O2 -D_GNU_SOURCE -DWICK_HAVE_CUDA=1 -Isrc -Iinclude bench/cuda/bench_attn.c \
    -Wl,--start-group $B/libwick.a $B/libwick_cuda.a -Wl,--end-group -L/usr/local/cuda/lib64 \
    -lcudart -lcublas -lcublasLt $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) \
    -lpthread -lm -ldl -lstdc++ -o $B/bench_attn >> "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  echo "== build: $(( $(date +%s) - T0 )) s"
fi
T1=$(date +%s)
timeout 150 $B/test_cuda_kernels > "$OUT/kernels.log" 2>&1; rc=$?
grep -E "^attention|FAIL|passed|failed" "$OUT/kernels.log" | cut -c1-150
echo "== kernel tests rc=$rc, $(( $(date +%s) - T1 )) s"
timeout 120 $B/bench_attn "${1:-4096}" > "$OUT/bench.log" 2>&1; rc=$?
grep -v RESULT "$OUT/bench.log"
echo "== bench rc=$rc, total $(( $(date +%s) - T0 )) s"
