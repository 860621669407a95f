#!/bin/bash
# Device call for the decode-step overhead work (docs/CUDA.md, v7): kernel
# tests and CPU-vs-CUDA parity on the synthetic models (side by side), then
# Llama-3-8B-shape decode (bench: Q4_K_M and BF16, 32 layers; bench8: BF16,
# 8 layers and a 32000-token vocabulary, quick) with programmatic dependent
# launch and the folded RMSNorm on and off, against the build of the last
# commit (bench_cuda_head) in the same call. Logs go to $OUT (at most 4 files).
#   bench/cuda/dec.sh [tests] [parity] [bench|bench8]   (default: tests parity bench)
# Runs from a snapshot (the commit plus the CUDA tree). Binaries built on the
# workstation may come along gzipped in bin/ (wick, test_cuda_kernels,
# test_cuda_parity, bench_cuda, bench_cuda_head); when they cannot run here
# (a library or symbol version missing) everything but bench_cuda_head is
# built here instead. Carry .debs (PCRE2 for the device).
set -u
STEPS=${*:-tests parity bench}
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/wick-dec-out}
mkdir -p "$OUT"
LOG=$OUT/dec.log
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
. bench/cuda/env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NP=$(nproc)
B=build-dev-dec
T0=$(date +%s)
mkdir -p $B
say "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), $NP cores"

runs() { [ -x "$1" ] && ! ldd "$1" 2>&1 | grep -q "not found"; }
for f in bin/*.gz; do [ -f "$f" ] && gunzip -c "$f" > $B/$(basename "$f" .gz) && chmod +x $B/$(basename "$f" .gz); done
if runs $B/wick && runs $B/test_cuda_kernels && runs $B/test_cuda_parity && runs $B/bench_cuda; then
  say "== prebuilt binaries run here"
else
  say "== building here"
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 || { say "cmake failed"; exit 1; }
  cmake --build $B --target wick_cli test_cuda_kernels test_cuda_parity -j"$NP" > "$OUT/build.log" 2>&1 ||
    { say "build failed"; tail -20 "$OUT/build.log"; exit 1; }
  gcc -std=c11 -O2 -D_GNU_SOURCE -DWICK_HAVE_CUDA=1 -Isrc -Iinclude bench/cuda/bench_cuda.c \
    $B/libwick.a $B/libwick_cuda.a -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt \
    $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) -lpthread -lm -lstdc++ -ldl \
    -o $B/bench_cuda >> "$OUT/build.log" 2>&1 || say "bench_cuda build failed"
  say "== build: $(($(date +%s) - T0)) s"
fi

# The 8B models (CPU work) in the background while the tests run.
MK=
if has bench || has bench8; then
  TYPES="q4_k_m bf16" MKARGS=""
  has bench8 && TYPES="bf16" MKARGS="--layers 8 --vocab 32000"
  (for ty in $TYPES; do
     t1=$(date +%s)
     $B/wick mkmodel --arch llama --like llama3-8b $MKARGS --type $ty -o /tmp/8b-$ty.part > /dev/null 2>&1 &&
       mv /tmp/8b-$ty.part /tmp/8b-$ty.gguf
     echo "mkmodel $ty: $(($(date +%s) - t1)) s" >> "$LOG"
   done) &
  MK=$!
fi

KT=
if has tests; then  # beside the parity run (the references are host work)
  (timeout 150 $B/test_cuda_kernels > "$OUT/kernels.log" 2>&1; echo "rc=$?" >> "$OUT/kernels.log") &
  KT=$!
fi

if has parity; then
  say "== parity (CPU exact vs CUDA default kernels)"
  . bench/cuda/synth.sh
  SYN=/tmp/wick-syn
  list=$(synth_models $B/wick $SYN)
  timeout 200 $B/test_cuda_parity $list > "$OUT/parity.log" 2>&1
  rc=$?
  say "parity rc=$rc: $(tail -1 "$OUT/parity.log") ($(($(date +%s) - T0)) s)"
  grep -E "FAIL" "$OUT/parity.log" | head | tee -a "$LOG"
fi

if [ -n "$KT" ]; then
  wait $KT
  say "== kernel tests: $(tail -1 "$OUT/kernels.log"), $(grep -c FAIL "$OUT/kernels.log") FAIL lines ($(($(date +%s) - T0)) s)"
  grep -E "FAIL|passed|failed" "$OUT/kernels.log" | head -20 | tee -a "$LOG"
  say "folded-norm cases: $(grep -c '+norm' "$OUT/kernels.log")"
fi

if [ -n "$MK" ]; then
  wait $MK
  ARGS="4096 4096 64"
  has bench8 && ARGS="64 64 64"
  say "== decode, Llama-3-8B shape ($TYPES $MKARGS): bench_cuda model FILE $ARGS ($(($(date +%s) - T0)) s)"
  # label, binary, environment
  one() {
    local lab=$1 bin=$2
    shift 2
    [ -x "$bin" ] || { say "no $bin"; return; }
    echo "== $ty $lab" >> "$OUT/bench.log"
    env "$@" timeout 60 "$bin" model "$f" $ARGS > /tmp/bench-one.log 2>&1
    cat /tmp/bench-one.log >> "$OUT/bench.log"
    say "$ty $lab: $(grep "RESULT decode" /tmp/bench-one.log | awk '{printf "ctx %s %s ms %s tok/s; ", $3, $4, $5}')"
    grep FAIL /tmp/bench-one.log | head -3 | tee -a "$LOG"
  }
  for ty in $TYPES; do
    f=/tmp/8b-$ty.gguf
    [ -f $f ] || { say "no 8B $ty model"; continue; }
    one head $B/bench_cuda_head
    one new $B/bench_cuda
    one pdl0 $B/bench_cuda WICK_CUDA_PDL=0
    [ -x $B/bench_cuda_v4plain ] && one v4plain $B/bench_cuda_v4plain
    if has bench; then
      one pdl0-fold0 $B/bench_cuda WICK_CUDA_PDL=0 WICK_CUDA_FOLD_NORM=0
      one pdl1-fold0 $B/bench_cuda WICK_CUDA_FOLD_NORM=0
      one head2 $B/bench_cuda_head
      one new2 $B/bench_cuda
    fi
    rm -f $f
  done
fi
say "== total $(($(date +%s) - T0)) s"
