#!/bin/bash
# Matrix-vector kernels only, in one short device call: the kernel tests, the
# bandwidth table (bench_cuda matvec) and the block-shape sweep, then (with
# "decode") 8B-shape Q4_K_M decode with the matrix-vector settings to compare.
# Runs binaries built here beforehand when they start on the device
# (carry build-mv/test_cuda_kernels and build-mv/bench_cuda), else builds
# them in build-dev-mv. Logs go to $OUT.
#   bench/cuda/mv.sh [test] [bench] [sweep] [decode]   (default: test bench sweep)
set -u
STEPS=${*:-test bench sweep}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/wick-mv-out}
mkdir -p "$OUT"
LOG=$OUT/mv.log
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
NP=$(nproc)
T0=$(date +%s)
. bench/cuda/env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
say "== machine: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null), $NP cores"

if has decode; then  # the 8B generator needs no GPU: a CPU-only build, in the background
  ( cmake -S . -B build-dev-mv-cpu -DCMAKE_BUILD_TYPE=Release -DWICK_CUDA=OFF > "$OUT/cpu-build.log" 2>&1 &&
      cmake --build build-dev-mv-cpu --target wick_cli -j"$NP" >> "$OUT/cpu-build.log" 2>&1 &&
      build-dev-mv-cpu/wick mkmodel --arch llama --like llama3-8b --type q4_k_m -o /tmp/mv-8b.gguf.part \
        > /dev/null 2>&1 && mv /tmp/mv-8b.gguf.part /tmp/mv-8b.gguf
    echo "8B model: $(( $(date +%s) - T0 )) s" >> "$LOG" ) &
  MK=$!
fi

B=build-mv
if ! $B/bench_cuda ceil > "$OUT/ceil.log" 2>&1; then
  say "carried binaries do not run ($(head -c 300 "$OUT/ceil.log")); building"
  B=build-dev-mv
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
    cmake --build $B --target wick wick_cuda test_cuda_kernels -j"$NP" >> "$OUT/build.log" 2>&1 &&
    gcc -std=c11 -O2 -D_GNU_SOURCE -DWICK_HAVE_CUDA=1 -Isrc -Iinclude bench/cuda/bench_cuda.c \
      $B/libwick.a $B/libwick_cuda.a -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt \
      $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) -lpthread -lm -lstdc++ \
      -o $B/bench_cuda >> "$OUT/build.log" 2>&1 || { say "build failed"; grep -E "error" "$OUT/build.log" | head; exit 1; }
  $B/bench_cuda ceil > "$OUT/ceil.log" 2>&1
fi
say "== binaries: $B ($(( $(date +%s) - T0 )) s)"
cat "$OUT/ceil.log" | tee -a "$LOG"
BW=$(grep "RESULT ceil" "$OUT/ceil.log" | awk '{print $3}')

if has test; then
  say "== kernel tests"
  timeout 150 $B/test_cuda_kernels > "$OUT/kernels.log" 2>&1; rc=$?
  grep -E "FAIL|passed|failed" "$OUT/kernels.log" | tee -a "$LOG" | head -40
  grep -E "^(matmul|glu|chain)" "$OUT/kernels.log" | awk '{print $1, $2, $3, $5, $NF}' | sort -k5 -g | tail -3 | tee -a "$LOG"
  say "kernel tests rc=$rc ($(( $(date +%s) - T0 )) s)"
fi
if has bench; then
  say "== matvec (bandwidth vs copy ${BW:-?} GB/s)"
  timeout 150 $B/bench_cuda matvec "${BW:-4229}" > "$OUT/matvec.log" 2>&1
  grep -v RESULT "$OUT/matvec.log" | tee -a "$LOG"
  say "($(( $(date +%s) - T0 )) s)"
fi
if has sweep; then
  say "== sweep"
  timeout 120 $B/bench_cuda sweep "${BW:-4229}" 2>&1 | tee -a "$LOG"
  say "($(( $(date +%s) - T0 )) s)"
fi
if has decode; then
  say "== waiting for the 8B model ($(( $(date +%s) - T0 )) s)"
  wait $MK
  if [ -f /tmp/mv-8b.gguf ]; then
    for mv in ${MVS:-int8 int8-nopdl stream f32}; do
      export WICK_CUDA_MATVEC=${mv%%-*} WICK_CUDA_PDL=1 WICK_CUDA_FUSE_GLU=1
      [ $mv = int8-nopdl ] && export WICK_CUDA_PDL=0
      [ $mv = int8-nofuse ] && export WICK_CUDA_FUSE_GLU=0
      timeout 60 $B/bench_cuda model /tmp/mv-8b.gguf 512 512 64 2>&1 | grep -E "decode|FAIL" |
        sed "s/^/$mv: /" | tee -a "$LOG"
    done
  fi
fi
say "== total $(( $(date +%s) - T0 )) s"
