#!/bin/bash
# The CUDA backend's one device script: builds with CMake, runs the kernel
# and parity tests, measures the machine's ceilings, then benchmarks
# matrix-vector kernels and whole-model prefill/decode on 8B-shaped models
# made here with `wick mkmodel`. Logs go to $OUT (or /tmp/wick-cuda-out).
#   bench/cuda/run.sh [test|bench|all] [8B types...]   (default: all q4_k_m fp8_e4m3 bf16)
#   bench/cuda/run.sh quick [8B types...]   one short call (~5 min): a CPU-only
#     build makes the 8B models in the background while the CUDA build, the
#     kernel tests, parity (default and WICK_CUDA_MATVEC=int8) and matvec run;
#     then decode (1024-token prefill, no 4096) with WICK_CUDA_MATVEC=int8,
#     int8 with WICK_CUDA_FUSE_GLU=0, and f32; last the block-shape sweep.
#
# Before the device call, here (both folders are git-ignored; carry them):
#   mkdir -p .debs && (cd .debs && apt-get download libpcre2-dev libpcre2-8-0 \
#     libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 pkgconf pkgconf-bin libpkgconf3)
#   mkdir -p models-trim
#   .venv/bin/python bench/cuda/trim_model.py models/smollm2-135m-instruct-q4_1.gguf \
#     models-trim/smollm2-3l.gguf 3 8192
#   .venv/bin/python bench/cuda/trim_model.py models/gemma3-270m-q4_k_m.gguf \
#     models-trim/gemma3-6l.gguf 6 8192
set -u
MODE=${1:-all}
shift || true
TYPES=${*:-q4_k_m fp8_e4m3 bf16}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/wick-cuda-out}
mkdir -p "$OUT"
LOG=$OUT/run.log
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
NP=$(nproc)

. bench/cuda/env.sh

say "== machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null), $NP cores"
say "== commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +uncommitted)"
B=${WICK_BUILD:-build-cuda}
T0=$(date +%s)
if [ "$MODE" = quick ]; then
  # The 8B generator needs no GPU: build it without CUDA and start it now.
  cmake -S . -B $B-cpu -DCMAKE_BUILD_TYPE=Release -DWICK_CUDA=OFF > "$OUT/cmake.log" 2>&1 &&
    cmake --build $B-cpu --target wick_cli -j"$NP" >> "$OUT/build.log" 2>&1 || say "cpu build failed"
  say "== cpu build: $(( $(date +%s) - T0 )) s"
  ( for ty in $TYPES; do
      t1=$(date +%s)
      $B-cpu/wick mkmodel --arch llama --like llama3-8b --type $ty -o /tmp/wick-8b-$ty.gguf.part > /dev/null 2>&1 &&
        mv /tmp/wick-8b-$ty.gguf.part /tmp/wick-8b-$ty.gguf
      echo "mkmodel $ty: $(( $(date +%s) - t1 )) s" >> "$LOG"
    done ) &
  MK=$!
fi
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 || { say "cmake failed"; tail -20 "$OUT/cmake.log"; exit 1; }
for t in wick_cuda wick wick_cli test_cuda_kernels test_cuda_parity; do
  cmake --build $B --target $t -j"$NP" >> "$OUT/build.log" 2>&1 || say "build of $t failed (see build.log)"
done
grep -E "error|warning" "$OUT/build.log" | head -20
gcc -std=c11 -O2 -D_GNU_SOURCE -DWICK_HAVE_CUDA=1 -Isrc -Iinclude bench/cuda/bench_cuda.c \
  $B/libwick.a $B/libwick_cuda.a -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt \
  $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) -lpthread -lm -lstdc++ -o $B/bench_cuda \
  >> "$OUT/build.log" 2>&1 || say "bench_cuda build failed"
say "== build: $(( $(date +%s) - T0 )) s"
WICK=$B/wick
[ "$MODE" = quick ] && WICK=$B-cpu/wick
SYN=/tmp/wick-syn
mkdir -p $SYN

if [ "$MODE" = test ] || [ "$MODE" = all ] || [ "$MODE" = quick ]; then
  say "== kernel tests"
  timeout 120 $B/test_cuda_kernels > "$OUT/kernels.log" 2>&1; rc=$?
  grep -E "FAIL|passed|failed" "$OUT/kernels.log" | tee -a "$LOG" | head -40; say "kernel tests rc=$rc"
  say "== synthetic models"
  T1=$(date +%s)
  list=""
  for arch in llama qwen2 qwen3 gemma3; do
    for ty in f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k fp8_e4m3 fp8_e5m2 q4_k_m; do
      f=$SYN/$arch-tiny-$ty.gguf
      $WICK mkmodel --arch $arch --like tiny --type $ty --seed 7 -o $f > /dev/null && list="$list $f"
    done
  done
  $WICK mkmodel --arch llama --like smollm2 --layers 3 --type q4_k_m -o $SYN/llama-smollm2-q4km.gguf > /dev/null && list="$list $SYN/llama-smollm2-q4km.gguf"
  $WICK mkmodel --arch qwen2 --like smollm2 --layers 2 --type bf16 -o $SYN/qwen2-smollm2-bf16.gguf > /dev/null && list="$list $SYN/qwen2-smollm2-bf16.gguf"
  $WICK mkmodel --arch qwen3 --like qwen3-0.6b --layers 2 --type q4_k -o $SYN/qwen3-06b-q4k.gguf > /dev/null && list="$list $SYN/qwen3-06b-q4k.gguf"
  $WICK mkmodel --arch gemma3 --like gemma3-270m --layers 6 --type q4_k_m -o $SYN/gemma3-270m-q4km.gguf > /dev/null && list="$list $SYN/gemma3-270m-q4km.gguf"
  $WICK mkmodel --arch llama --like llama3-8b --layers 1 --vocab 32000 --type fp8_e4m3 -o $SYN/llama-8b1l-fp8.gguf > /dev/null && list="$list $SYN/llama-8b1l-fp8.gguf"
  say "made $(echo $list | wc -w) synthetic models in $(( $(date +%s) - T1 )) s"
  say "== parity (CPU exact vs CUDA)"
  real=""
  for f in models-trim/*.gguf models/*.gguf; do [ -f "$f" ] && real="$real $f"; done
  PT=300; [ "$MODE" = quick ] && PT=150
  # Once with the default kernels, once with the int8-activation ones.
  for mv in default int8; do
    say "-- matvec kernels: $mv"
    if [ $mv = int8 ]; then export WICK_CUDA_MATVEC=int8; else unset WICK_CUDA_MATVEC; fi
    timeout $PT $B/test_cuda_parity $real $list > "$OUT/parity-$mv.log" 2>&1; rc=$?
    grep -vE "^$" "$OUT/parity-$mv.log" | sed "s|$SYN/||" | tee -a "$LOG" | tail -80; say "parity ($mv) rc=$rc"
  done
  unset WICK_CUDA_MATVEC
fi

if [ "$MODE" = bench ] || [ "$MODE" = all ]; then
  say "== ceilings"
  timeout 60 $B/bench_cuda ceil 2>&1 | tee -a "$LOG"
  BW=$(grep "RESULT ceil" "$LOG" | tail -1 | awk '{print $3}')
  say "== matvec (bandwidth vs copy ${BW:-?} GB/s)"
  timeout 240 $B/bench_cuda matvec "${BW:-4300}" 2>&1 | tee -a "$LOG" | grep -v RESULT
  for ty in $TYPES; do
    say "== Llama-3-8B shape, $ty"
    f=/tmp/wick-8b-$ty.gguf
    T1=$(date +%s)
    timeout 200 $WICK mkmodel --arch llama --like llama3-8b --type $ty -o $f 2>&1 | tee -a "$LOG"
    say "mkmodel: $(( $(date +%s) - T1 )) s"
    timeout 240 $B/bench_cuda model $f 4096 1024 128 2>&1 | tee -a "$LOG"
    rm -f $f
  done
fi
if [ "$MODE" = quick ]; then
  say "== ceilings"
  timeout 60 $B/bench_cuda ceil 2>&1 | tee -a "$LOG"
  BW=$(grep "RESULT ceil" "$LOG" | tail -1 | awk '{print $3}')
  say "== matvec (bandwidth vs copy ${BW:-?} GB/s)"
  timeout 90 $B/bench_cuda matvec "${BW:-4250}" 2>&1 | tee -a "$LOG" | grep -v RESULT
  say "== waiting for the 8B models ($(( $(date +%s) - T0 )) s)"
  wait $MK
  for ty in $TYPES; do
    f=/tmp/wick-8b-$ty.gguf
    [ -f $f ] || { say "no $f"; continue; }
    for mv in int8 int8-nofuse f32; do
      say "== Llama-3-8B shape, $ty, matvec $mv"
      export WICK_CUDA_MATVEC=${mv%-nofuse} WICK_CUDA_FUSE_GLU=1
      [ $mv = int8-nofuse ] && export WICK_CUDA_FUSE_GLU=0
      timeout 90 $B/bench_cuda model $f 1024 1024 64 2>&1 | sed "s/^RESULT /RESULT $ty $mv /" | tee -a "$LOG"
    done
    unset WICK_CUDA_MATVEC WICK_CUDA_FUSE_GLU
    rm -f $f
  done
  say "== sweep ($(( $(date +%s) - T0 )) s)"
  timeout 60 $B/bench_cuda sweep "${BW:-4250}" 2>&1 | tee -a "$LOG"
fi
say "== summary"
grep RESULT "$LOG" | tee "$OUT/results.txt"
say "== total $(( $(date +%s) - T0 )) s"
