#!/bin/bash
# The end-of-session device call: build, every CUDA test (kernels, device
# top-k, CPU-vs-CUDA parity on synthetic and trimmed real models), the CPU
# kernel tests on the device host's CPU (its AVX-512 level), the ceilings,
# the matrix-vector table and the Llama-3-8B-shape benchmarks for the types
# given (default q4_k_m fp8_e4m3 bf16): a 4096-token prefill in one chunk,
# decode at context 16 and 4096, and (first type) the memory with a
# 4096-token context and 512-token batches. Logs go to $OUT.
#   bench/cuda/session.sh [types...]      carry .debs and models-trim
set -u
TYPES=${*:-q4_k_m fp8_e4m3 bf16}
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/wick-cuda-out}
mkdir -p "$OUT"
LOG=$OUT/run.log
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
. bench/cuda/env.sh
NP=$(nproc)
B=build-dev
T0=$(date +%s)
say "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), $NP cores," \
  "commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +uncommitted)"

# The 8B models need no GPU: a CPU-only build makes them in the background.
(cmake -S . -B $B-cpu -DCMAKE_BUILD_TYPE=Release -DWICK_CUDA=OFF > "$OUT/cpu-build.log" 2>&1 &&
  cmake --build $B-cpu --target wick_cli test_kernels -j"$NP" >> "$OUT/cpu-build.log" 2>&1 ||
  echo "cpu build failed" >> "$LOG"
 for ty in $TYPES; do
   t1=$(date +%s)
   $B-cpu/wick mkmodel --arch llama --like llama3-8b --type "$ty" -o /tmp/8b-$ty.part > /dev/null 2>&1 &&
     mv /tmp/8b-$ty.part /tmp/8b-$ty.gguf
   echo "mkmodel $ty: $(($(date +%s) - t1)) s" >> "$LOG"
 done) &
MK=$!

cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 || { say "cmake failed"; exit 1; }
for t in wick_cuda wick_cli test_cuda_kernels test_cuda_parity test_cuda_topk; do
  cmake --build $B --target $t -j"$NP" >> "$OUT/build.log" 2>&1 || say "build of $t failed"
done
gcc -std=c11 -O2 -D_GNU_SOURCE -DWICK_HAVE_CUDA=1 -Isrc -Iinclude bench/cuda/bench_cuda.c \
  $B/libwick.a $B/libwick_cuda.a -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt \
  $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) -lpthread -lm -lstdc++ -ldl \
  -o $B/bench_cuda >> "$OUT/build.log" 2>&1 || say "bench_cuda build failed"
say "== build: $(($(date +%s) - T0)) s"

say "== kernel tests"
timeout 150 $B/test_cuda_kernels > "$OUT/kernels.log" 2>&1
say "kernel tests rc=$? ($(grep -c FAIL "$OUT/kernels.log") FAIL lines)"
grep -E "FAIL|passed|failed" "$OUT/kernels.log" | head -20 | tee -a "$LOG"
say "== device top-k"
timeout 60 $B/test_cuda_topk 2>&1 | tail -8 | tee -a "$LOG"

say "== parity (CPU exact vs CUDA default kernels)"
. bench/cuda/synth.sh
SYN=/tmp/wick-syn
list=$(synth_models $B/wick $SYN)
real=""
for f in models-trim/*.gguf; do [ -f "$f" ] && real="$real $f"; done
timeout 200 $B/test_cuda_parity $real $list > "$OUT/parity.log" 2>&1
rc=$?
sed "s|$SYN/||" "$OUT/parity.log" | grep -vE "^$" | tee -a "$LOG" | tail -70 > /dev/null
say "parity rc=$rc: $(tail -1 "$OUT/parity.log")"
grep -E "FAIL" "$OUT/parity.log" | head | tee -a "$LOG"

say "== ceilings and matrix-vector"
timeout 60 $B/bench_cuda ceil 2>&1 | tee -a "$LOG"
BW=$(grep "RESULT ceil" "$LOG" | tail -1 | awk '{print $3}')
timeout 120 $B/bench_cuda matvec "${BW:-4250}" > "$OUT/matvec.log" 2>&1
grep -v RESULT "$OUT/matvec.log" | tee -a "$LOG"
say "== time so far $(($(date +%s) - T0)) s; waiting for the 8B models"
wait $MK
say "== CPU kernels on the device host ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
timeout 60 $B-cpu/test_kernels 2>&1 | tail -4 | tee -a "$LOG"
first=1
for ty in $TYPES; do
  f=/tmp/8b-$ty.gguf
  [ -f $f ] || { say "no 8B $ty model"; continue; }
  say "== Llama-3-8B shape, $ty: prefill 4096 in one chunk, decode at 16 and 4096"
  timeout 120 $B/bench_cuda model $f 4096 4096 64 2>&1 | sed "s/^RESULT /RESULT $ty /" | tee -a "$LOG"
  if [ $first = 1 ]; then
    say "== $ty: 4096-token context, 512-token batches (memory); whole logits copied back"
    WICK_BENCH_TOPK=0 timeout 90 $B/bench_cuda model $f 4096 512 32 2>&1 |
      sed "s/^RESULT /RESULT $ty ctx4096-b512 /" | tee -a "$LOG"
    first=0
  fi
  rm -f $f
done
say "== total $(($(date +%s) - T0)) s"
