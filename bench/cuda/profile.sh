#!/bin/bash
# Profiling pass for the CUDA backend (device machine): block-shape sweep of
# the matrix-vector kernel, ncu reports of it, and per-kernel times of a
# decode step on a 2-layer Llama-3-8B-shaped Q4_K_M model. Logs to $OUT.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/wick-cuda-out}
mkdir -p "$OUT"
. bench/cuda/env.sh
B=${WICK_BUILD:-build-dev}
NP=$(nproc)
T0=$(date +%s)
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 || { echo cmake failed; tail /tmp/cmake.log; exit 1; }
for t in wick_cuda wick wick_cli test_cuda_kernels test_cuda_parity; do
  cmake --build $B --target $t -j"$NP" >> "$OUT/build.log" 2>&1 || echo "build of $t failed"
done
gcc -std=c11 -O2 -D_GNU_SOURCE -DWICK_HAVE_CUDA=1 -Isrc -Iinclude bench/cuda/bench_cuda.c \
  $B/libwick.a $B/libwick_cuda.a -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt \
  $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) -lpthread -lm -lstdc++ -o $B/bench_cuda
echo "== build $(( $(date +%s) - T0 )) s"
timeout 100 $B/test_cuda_kernels > "$OUT/kernels.log" 2>&1; echo "kernel tests rc=$? $(tail -1 $OUT/kernels.log)"
BW=4230
timeout 120 $B/bench_cuda sweep $BW 2>&1 | tee "$OUT/sweep.log"
timeout 60 $B/bench_cuda matvec $BW 2>&1 | grep -v RESULT | tee "$OUT/matvec.log"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "== ncu: $NCU"
for ty in f16 q4_k; do
  timeout 60 $NCU --clock-control none -k regex:k_matvec --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section MemoryWorkloadAnalysis $B/bench_cuda mvone $ty > "$OUT/ncu_$ty.log" 2>&1
  grep -E "k_matvec|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers|Stall|L1/TEX Hit|L2 Hit|Warp Cycles Per Issued|Issued Ipc" "$OUT/ncu_$ty.log" | head -40
done
f=/tmp/w8b2.gguf
$B/wick mkmodel --arch llama --like llama3-8b --layers 2 --type q4_k_m -o $f
timeout 150 $NCU --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
  $B/bench_cuda model $f 64 64 16 > "$OUT/ncu_decode.log" 2>&1
grep -E "k_[a-z_0-9]+|cutlass|gemm|gpu__time_duration" "$OUT/ncu_decode.log" | sed "s/(cu_attn_shape.*//; s/(const.*//" | paste - - | awk "{print \$1, \$(NF-2), \$(NF-1), \$NF}" | head -40
echo "== total $(( $(date +%s) - T0 )) s"
