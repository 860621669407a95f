#!/bin/bash
# The CUDA backend's device script: one call builds, tests and measures.
#   bench/cuda/session.sh            every step below but sweep and ncu
#   STEPS="tests model" AB="WICK_CUDA_ATTN=warp" bench/cuda/session.sh
# Steps (STEPS, space-separated):
#   tests   kernel tests, the decode attention's Q/K/V epilogue test and device top-k (beside parity: the references are host work)
#   parity  CPU exact vs CUDA default kernels on the synthetic models (synth.sh) and
#           the trimmed real models in models-trim/; again under each setting in PARITY_AB
#   ceil    copy bandwidth and cuBLAS bf16 rate
#   matvec  matrix-vector table, % of the copy bandwidth (bench_cuda matvec; MV_TYPES:
#           type names joined by commas, default all), again under each setting in MV_AB
#           (the /reg rows name their kernel and format: settings that only the engine's
#           dispatch reads, launch_mvr's, do not reach them; ncu on `bench_cuda mvone TYPE 6`
#           or the model step does)
#   (KT_ENV: environment settings the kernel tests of `tests` run under, e.g. WICK_CUDA_ASYNC=1,
#   or WICK_TEST_TYPES=q2_k,iq4_xs for those types only, the attention tests then skipped)
#   sweep   the streamed kernels' block shapes (bench_cuda sweep $SWEEP; SWEEP v6 or v8)
#   dequant the GEMM path's dequantization to f16 (bench_cuda dequant)
#   rows    the register kernel by row count at 4096 columns (bench_cuda rows), again
#           under each setting in ROWS_AB
#   cpu     the CPU kernel tests on the device host's CPU (its AVX-512 level)
#   model   Llama-3-8B shape, TYPES (default q4_k_m fp8_e4m3 bf16), `bench_cuda model FILE
#           $ARGS` (default 4096 4096 64: a 4096-token prefill, decode at context 16 and
#           4096), once as built and once under each environment setting in AB (words like
#           WICK_CUDA_ATTN=warp; join several with commas), and with the build of ref/ when
#           that folder holds another tree (e.g. `git archive COMMIT`); memory with 512-token
#           batches for the first type (CHUNKS: batch sizes, default 512; MODEL_REPS: rounds of
#           base / AB / ref, default 1)
#   first   a first request (`wick run`, ~1900-token prompt, 32 tokens) on the 8B model of the
#           first type, with and without the load-time warm-up (WICK_CUDA_WARMUP=0), 3 rounds
#   batch   decode steps of 1 to 64 sequences at once (a server's batch) on BATCH_TYPES (default
#           the first type of TYPES) at context 512 (`bench_cuda batch FILE 512 32`), as built, under each AB
#           and with the build of ref/ (matvec too, beside the table as built)
#   flash   flash attention (prefill) alone at 4096 tokens; with ncu its profile (FLASH_V: variant)
#   stamps  the decode attention's timeline (a build with -DWICK_CUDA_STAMPS; bench_attn
#           stamps, then the 8B model of the first type at ARGS, its last layer's launch,
#           as built and under each setting in AB)
#   attn    decode attention alone (bench_attn decode: kernels x splits, 4096 and 16384 keys)
#   sanitize compute-sanitizer over test_cuda_parity (prefill chunks, decode, graphs, a batch
#           of sequences): memcheck (with leak check) and synccheck on the trimmed real models
#           and tiny synthetic ones of every format family, initcheck and racecheck on the tiny
#           Q4_K_M ones without the warm-up (no cuBLAS); SAN_TOOLS, SAN_T (seconds a tool, 400)
#   ncu     per-kernel times of one decode step (2-layer 8B-shape models of NCU_TYPES, default
#           q4_k_m; context NCU_CTX, default 4096, 0 to skip; dependent launch and graphs off:
#           ncu failed a launch with them), the matrix-vector kernel's profile sections (NCU_MV:
#           TYPE or TYPE:PATH of bench_cuda mvone, default "q4_k f16", empty for none) and with
#           attn the decode attention's
# Logs go to $OUT (run.log the summary). Carry .debs and models-trim; make them here with:
#   mkdir -p .debs && (cd .debs && apt-get download libpcre2-dev libpcre2-8-0 \
#     libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 pkgconf pkgconf-bin libpkgconf3)
#   mkdir -p models-trim
#   .venv/bin/python bench/cuda/trim_model.py models/smollm2-135m-instruct-q4_1.gguf \
#     models-trim/smollm2-3l.gguf 3 8192
#   .venv/bin/python bench/cuda/trim_model.py models/gemma3-270m-q4_k_m.gguf \
#     models-trim/gemma3-6l.gguf 6 8192
set -u
STEPS=${STEPS:-tests parity ceil matvec cpu model}
TYPES=${TYPES:-q4_k_m fp8_e4m3 bf16}
ARGS=${ARGS:-4096 4096 64}
AB=${AB:-}
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/wick-cuda-out}
mkdir -p "$OUT"
LOG=$OUT/run.log
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
. bench/cuda/env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NP=$(nproc)
B=build-dev
T0=$(date +%s)
since() { echo "$(($(date +%s) - T0)) s"; }
say "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), $NP cores," \
  "commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +uncommitted)"
say "== steps: $STEPS; types: $TYPES; args: $ARGS; ab: ${AB:-none}"

# The 8B models need no GPU: a CPU-only build makes them in the background.
MK=
if has model || has cpu || has ncu || has stamps || has batch || has first; then
  (cmake -S . -B $B-cpu -DCMAKE_BUILD_TYPE=Release -DWICK_CUDA=OFF > "$OUT/cpu-build.log" 2>&1 &&
    cmake --build $B-cpu --target wick_cli test_kernels test_kernels_act -j"$NP" >> "$OUT/cpu-build.log" 2>&1 ||
    echo "cpu build failed" >> "$LOG"
   if has ncu; then
     for ty in ${NCU_TYPES:-q4_k_m}; do
       $B-cpu/wick mkmodel --arch llama --like llama3-8b --layers 2 --type $ty -o /tmp/8b2.part \
         > /dev/null 2>&1 && mv /tmp/8b2.part /tmp/8b2-$ty.gguf
     done
   fi
   if has model || has stamps || has batch || has first; then
     for ty in $TYPES; do
       t1=$(date +%s)
       $B-cpu/wick mkmodel --arch llama --like llama3-8b --type "$ty" -o /tmp/8b-$ty.part > /dev/null 2>&1 &&
         mv /tmp/8b-$ty.part /tmp/8b-$ty.gguf
       echo "mkmodel $ty: $(($(date +%s) - t1)) s" >> "$LOG"
     done
   fi) &
  MK=$!
fi

cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 || { say "cmake failed"; exit 1; }
cmake --build $B --target wick_cli test_cuda_kernels test_cuda_attn_post test_cuda_parity test_cuda_topk -j"$NP" \
  > "$OUT/build.log" 2>&1 || { say "build failed"; grep -E "error" "$OUT/build.log" | head; exit 1; }
# Links a benchmark (bench/cuda/NAME.c) against the build's libraries into OUTFILE.
# Optional: $3 the build folder (default $B), $4 more compiler flags.
link_bench() {
  local bd=${3:-$B}
  gcc -std=c11 -O2 -D_GNU_SOURCE -DWICK_HAVE_CUDA=1 ${4:-} -Isrc -Iinclude "bench/cuda/$1.c" \
    $bd/libwick_cuda.a $bd/libwick.a $bd/libwick_cuda.a -L/usr/local/cuda/lib64 -lcudart -lcublas \
    -lcublasLt $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) -lpthread -lm \
    -lstdc++ -ldl -o "$2"
}
for b in bench_cuda bench_attn; do
  link_bench $b $B/$b >> "$OUT/build.log" 2>&1 || say "$b build failed"
done
REFB=
if [ -f ref/CMakeLists.txt ]; then  # the reference tree's bench_cuda, beside the tests
  (cd ref && ln -sfn ../.debs .debs 2>/dev/null
   cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/ref-build.log" 2>&1 &&
     cmake --build $B --target wick_cuda wick -j"$NP" >> "$OUT/ref-build.log" 2>&1 &&
     link_bench bench_cuda ../$B/bench_cuda_ref >> "$OUT/ref-build.log" 2>&1 ||
     echo "reference build failed" >> "$LOG") &
  REFB=$!
fi
say "== build: $(since)"
STB=
if has stamps; then  # a measurement build with the decode attention's timeline stamps
  (cmake -S . -B $B-st -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DWICK_CUDA_STAMPS \
     > "$OUT/stamps-build.log" 2>&1 &&
   cmake --build $B-st --target wick_cuda wick -j"$NP" >> "$OUT/stamps-build.log" 2>&1 &&
   for b in bench_cuda bench_attn; do
     link_bench $b $B-st/$b $B-st -DWICK_CUDA_STAMPS >> "$OUT/stamps-build.log" 2>&1
   done || echo "stamps build failed" >> "$LOG") &
  STB=$!
fi

KT=
if has tests; then
  (env ${KT_ENV:-} timeout 560 $B/test_cuda_kernels > "$OUT/kernels.log" 2>&1; echo "rc=$?" >> "$OUT/kernels.log"
   timeout 60 $B/test_cuda_topk > "$OUT/topk.log" 2>&1; echo "rc=$?" >> "$OUT/topk.log"
   timeout 200 $B/test_cuda_attn_post > "$OUT/attnpost.log" 2>&1; echo "rc=$?" >> "$OUT/attnpost.log") &
  KT=$!
fi
if has parity; then
  . bench/cuda/synth.sh
  SYN=/tmp/wick-syn
  list=$(synth_models $B/wick $SYN)
  real=""
  for f in models-trim/*.gguf; do [ -f "$f" ] && real="$real $f"; done
  for ab in base ${PARITY_AB:-}; do
    envs=()
    [ "$ab" != base ] && IFS=, read -r -a envs <<< "$ab"
    env "${envs[@]}" timeout 240 $B/test_cuda_parity $real $list > "$OUT/parity.log" 2>&1
    rc=$?
    sed "s|$SYN/||" "$OUT/parity.log" | grep -vE "^$" >> "$LOG"
    say "== parity ($ab) rc=$rc: $(tail -1 "$OUT/parity.log") ($(since))"
    grep -E "FAIL" "$OUT/parity.log" | head | tee -a "$LOG"
  done
fi
if has sanitize; then  # device-memory errors and leaks, barrier misuse, uninitialized reads, races
  # memcheck and synccheck over every model below. initcheck and racecheck
  # only where no product reaches cuBLAS (Q4_K_M models, no load-time
  # warm-up: prompt chunks of <= 32 tokens take the fused batch kernel):
  # initcheck does not see cuBLAS's Hopper GEMMs write their output (it
  # flags every later read of it; session 34), and racecheck reports
  # hazards inside those GEMMs and fails when they are excluded.
  . bench/cuda/synth.sh
  SD=/tmp/wick-san
  mkdir -p $SD
  san="" own=""
  for f in models-trim/*.gguf; do [ -f "$f" ] && san="$san $f"; done
  for spec in llama:q4_k_m gemma3:q4_k_m qwen2:bf16 qwen3:fp8_e4m3 gemma3:q4_0 llama:iq4_xs \
    qwen3:q3_k gemma3:q8_0; do
    f=$SD/${spec%:*}-${spec#*:}.gguf
    $B/wick mkmodel --arch ${spec%:*} --like tiny --type ${spec#*:} --seed 7 -o $f > /dev/null || continue
    san="$san $f"
    [ ${spec#*:} = q4_k_m ] && own="$own $f"
  done
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in ${SAN_TOOLS:-memcheck synccheck initcheck racecheck}; do
    extra=() envs=() list=$san
    [ $tool = memcheck ] && extra=(--leak-check full)
    case $tool in initcheck|racecheck) envs=(WICK_CUDA_WARMUP=0) list=$own ;; esac
    env "${envs[@]}" timeout ${SAN_T:-400} $CS --tool $tool "${extra[@]}" --error-exitcode 9 \
      $B/test_cuda_parity $list > "$OUT/san-$tool.log" 2>&1
    rc=$?
    say "== sanitize $tool rc=$rc: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san-$tool.log" | tail -1)," \
      "parity: $(grep -vE "^=" "$OUT/san-$tool.log" | tail -1) ($(since))"
    grep -E "^========= [A-Z]" "$OUT/san-$tool.log" | sort | uniq -c | sort -rn | head -8 | tee -a "$LOG"
  done
fi
if [ -n "$KT" ]; then
  wait $KT
  say "== kernel tests $(tail -1 "$OUT/kernels.log"), $(grep -c FAIL "$OUT/kernels.log") FAIL lines ($(since))"
  grep -E "FAIL|passed|failed" "$OUT/kernels.log" | head -20 | tee -a "$LOG"
  grep -E "^attention" "$OUT/kernels.log" >> "$LOG"
  say "== device top-k $(tail -1 "$OUT/topk.log"): $(tail -2 "$OUT/topk.log" | head -1)"
  say "== attention epilogue test $(tail -1 "$OUT/attnpost.log"), $(grep -c FAIL "$OUT/attnpost.log") FAIL lines"
  grep -E "FAIL" "$OUT/attnpost.log" | head -10 | tee -a "$LOG"
fi

BW=4235
if has ceil; then
  timeout 60 $B/bench_cuda ceil 2>&1 | tee -a "$LOG"
  BW=$(grep "RESULT ceil" "$LOG" | tail -1 | awk '{print $3}')
  BW=${BW:-4235}
fi
if has matvec; then
  for ab in base ${MV_AB:-}; do
    envs=()
    [ "$ab" != base ] && IFS=, read -r -a envs <<< "$ab"
    say "== matrix-vector, $ab ($(since))"
    env "${envs[@]}" timeout 150 $B/bench_cuda matvec "$BW" ${MV_TYPES:-} > "$OUT/matvec.log" 2>&1
    grep -v RESULT "$OUT/matvec.log" | tee -a "$LOG"
  done
fi
if has dequant; then
  say "== dequantization to f16 ($(since))"
  timeout 90 $B/bench_cuda dequant "$BW" 2>&1 | grep -v RESULT | tee -a "$LOG"
fi
if has rows; then
  for ab in base ${ROWS_AB:-}; do
    envs=()
    [ "$ab" != base ] && IFS=, read -r -a envs <<< "$ab"
    say "== matrix-vector by row count, $ab ($(since))"
    env "${envs[@]}" timeout 150 $B/bench_cuda rows "$BW" 2>&1 | grep -v RESULT | tee -a "$LOG"
  done
fi
if has sweep; then
  say "== sweep ($(since))"
  timeout 150 $B/bench_cuda sweep "$BW" ${SWEEP:-} 2>&1 | tee -a "$LOG"
fi

if has attn; then
  say "== decode attention ($(since))"
  timeout 120 $B/bench_attn decode 2>&1 | grep -v RESULT | tee -a "$LOG"
  timeout 60 $B/bench_attn layout 2>&1 | tee -a "$LOG"
  if has ncu; then  # the first layout case: the 8B shape, 4096 keys, 16 splits
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    timeout 90 $NCU --clock-control none -k regex:k_attn_decode --launch-skip 5 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      --section SchedulerStats --section MemoryWorkloadAnalysis $B/bench_attn layout > "$OUT/ncu_attn.log" 2>&1
    M=""
    for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait \
      not_selected selected dispatch_stall lg_throttle no_instruction branch_resolving membar sleeping; do
      M="$M,smsp__warp_issue_stalled_${r}_per_warp_active.pct"
    done
    timeout 90 $NCU --clock-control none -k regex:k_attn_decode --launch-skip 5 --launch-count 1 \
      --metrics "${M#,},gpu__time_duration.sum,dram__bytes_read.sum" $B/bench_attn layout \
      > "$OUT/ncu_attn_stalls.log" 2>&1
    grep -E "k_attn|Duration|DRAM Throughput|Achieved Occupancy|Registers|Stall|Warp Cycles Per Issued|No Eligible|Active Warps|Block Limit|Grid Size|stalled|dram__|gpu__time" \
      "$OUT/ncu_attn.log" "$OUT/ncu_attn_stalls.log" | head -60 | tee -a "$LOG"
  fi
fi

if has flash; then
  say "== flash attention, 4096 tokens ($(since))"
  timeout 120 $B/bench_attn 4096 2>&1 | grep -v RESULT | tee -a "$LOG"
  if has ncu; then
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    timeout 120 $NCU --clock-control none -k regex:k_flash_attn --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
      --section MemoryWorkloadAnalysis $B/bench_attn flash ${FLASH_V:-0} > "$OUT/ncu_flash.log" 2>&1
    S=smsp__average_warp_latency_issue_stalled
    M=""
    for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait \
      not_selected selected dispatch_stall lg_throttle no_instruction branch_resolving; do
      M="$M,smsp__warp_issue_stalled_${r}_per_warp_active.pct"
    done
    timeout 120 $NCU --clock-control none -k regex:k_flash_attn --launch-skip 1 --launch-count 1 \
      --metrics "${M#,},sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active" \
      $B/bench_attn flash ${FLASH_V:-0} > "$OUT/ncu_flash_stalls.log" 2>&1
    grep -E "Duration|Throughput|Eligible|Issued|Registers|Occupancy|Pipe|stalled|hmma|xu" \
      "$OUT/ncu_flash.log" "$OUT/ncu_flash_stalls.log" | head -70 | tee -a "$LOG"
  fi
fi

[ -n "$MK" ] && { say "== waiting for the CPU build and models ($(since))"; wait $MK; }
if has cpu; then
  say "== CPU kernels on the device host ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
  timeout 60 $B-cpu/test_kernels 2>&1 | tail -4 | tee -a "$LOG"
  timeout 120 $B-cpu/test_kernels_act 2>&1 | tail -3 | tee -a "$LOG"
fi
if has ncu; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  C=${NCU_CTX:-4096}
  for ty in ${NCU_TYPES:-q4_k_m}; do
    [ "$C" = 0 ] && break
    say "== ncu ($NCU): decode step, 2-layer 8B-shape $ty, context $C ($(since))"
    WICK_CUDA_PDL=0 WICK_CUDA_GRAPHS=0 timeout 150 $NCU --clock-control none \
      --metrics gpu__time_duration.sum --print-summary per-kernel $B/bench_cuda model /tmp/8b2-$ty.gguf "$C" "$C" 4 > "$OUT/ncu_decode_$ty.log" 2>&1
    grep -E "^ +[a-zA-Z_].*\(|gpu__time_duration" "$OUT/ncu_decode_$ty.log" | sed "s/(.*//" | paste - - |
      awk '{print $1, $(NF-2), $(NF-1), $NF}' | head -40 | tee -a "$LOG"
  done
  for tp in ${NCU_MV-q4_k f16}; do  # TYPE or TYPE:PATH (bench_cuda mvone)
    ty=${tp%%:*} path=${tp#*:}
    [ "$path" = "$tp" ] && path=
    timeout 90 $NCU --clock-control none -k regex:k_m --launch-count 1 --section SpeedOfLight \
      --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section SchedulerStats $B/bench_cuda mvone $ty $path > "$OUT/ncu_$ty$path.log" 2>&1
    say "-- ncu $tp"
    grep -E "k_mv|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers|Stall|L1/TEX Hit|L2 Hit|Warp Cycles Per Issued|Issued Ipc|Issue Slots|No Eligible|Active Warps" \
      "$OUT/ncu_$ty$path.log" | head -40 | tee -a "$LOG"
  done
fi
[ -n "$REFB" ] && wait $REFB
if has matvec && [ -x $B/bench_cuda_ref ]; then
  say "== matrix-vector, ref ($(since))"
  timeout 150 $B/bench_cuda_ref matvec "$BW" ${MV_TYPES:-} > "$OUT/matvec-ref.log" 2>&1
  grep -v RESULT "$OUT/matvec-ref.log" | tee -a "$LOG"
fi
if [ -n "$STB" ]; then
  wait $STB
  say "== decode attention timeline ($(since))"
  timeout 60 $B-st/bench_attn stamps 2>&1 | tee -a "$LOG"
  ty=${TYPES%% *}
  for ab in base $AB; do
    envs=()
    [ "$ab" != base ] && IFS=, read -r -a envs <<< "$ab"
    say "-- $ty, $ab"
    [ -f /tmp/8b-$ty.gguf ] && env "${envs[@]}" timeout 150 $B-st/bench_cuda model /tmp/8b-$ty.gguf \
      $ARGS 2>&1 | grep -E "^stamps|^ |RESULT decode" | tee -a "$LOG"
  done
fi
if has batch; then  # several sequences a step: BATCH_TYPES (default the first type)
 for ty in ${BATCH_TYPES:-${TYPES%% *}}; do
  if [ -f /tmp/8b-$ty.gguf ]; then
    for ab in base $AB; do
      envs=()
      [ "$ab" != base ] && IFS=, read -r -a envs <<< "$ab"
      say "== batch decode, $ty, $ab ($(since))"
      env "${envs[@]}" timeout 240 $B/bench_cuda batch /tmp/8b-$ty.gguf 512 32 2>&1 |
        grep -E "^batch|FAIL" | tee -a "$LOG"
    done
    if [ -x $B/bench_cuda_ref ]; then
      say "== batch decode, $ty, ref ($(since))"
      timeout 240 $B/bench_cuda_ref batch /tmp/8b-$ty.gguf 512 32 2>&1 | grep -E "^batch|FAIL" | tee -a "$LOG"
    fi
  else
    say "no 8B $ty model for the batch step"
  fi
 done
fi
if has first; then  # a first request's time with and without the load-time warm-up
  ty=${TYPES%% *} f=/tmp/8b-${TYPES%% *}.gguf
  P=$(for i in $(seq 120); do printf 'the quick brown fox jumps over the lazy dog %d. ' $i; done)
  for r in 1 2 3; do
    for w in 0 1; do
      t1=$(date +%s%N)
      WICK_CUDA_WARMUP=$w timeout 90 $B/wick run -m $f -p "$P" -n 32 --temp 0 -c 8192 \
        > /dev/null 2> /tmp/first.log
      t2=$(date +%s%N)
      say "first request, $ty, WICK_CUDA_WARMUP=$w: $(grep -o 'ready in [0-9.]* s' /tmp/first.log);" \
        "$(tail -1 /tmp/first.log); process $(((t2 - t1) / 1000000)) ms"
    done
  done
fi
if has model; then
  first=1
  for ty in $TYPES; do
    f=/tmp/8b-$ty.gguf
    [ -f $f ] || { say "no 8B $ty model"; continue; }
    say "== Llama-3-8B shape, $ty: bench_cuda model FILE $ARGS ($(since))"
    ref=
    [ -x $B/bench_cuda_ref ] && ref=ref
    for ab in $(for r in $(seq "${MODEL_REPS:-1}"); do echo base $AB $ref; done); do
      envs=() bin=$B/bench_cuda
      [ "$ab" = ref ] && bin=$B/bench_cuda_ref
      [ "$ab" != base ] && [ "$ab" != ref ] && IFS=, read -r -a envs <<< "$ab"
      env "${envs[@]}" timeout 150 $bin model $f $ARGS > /tmp/one.log 2>&1
      sed "s/^RESULT /RESULT $ty $ab /" /tmp/one.log >> "$OUT/model.log"
      say "$ty $ab: $(grep -E "RESULT (prefill|decode)" /tmp/one.log | cut -d' ' -f2- | tr '\n' ';')"
      grep -E "FAIL|error" /tmp/one.log | head -3 | tee -a "$LOG"
    done
    if [ $first = 1 ]; then
      for cb in ${CHUNKS:-512}; do
        say "== $ty: 4096-token context (4064 + 31 + 1), $cb-token batches (memory); whole logits copied back"
        WICK_BENCH_TOPK=0 timeout 90 $B/bench_cuda model $f 4064 $cb 31 2>&1 |
          sed "s/^RESULT /RESULT $ty ctx4096-b$cb /" | tee -a "$LOG"
      done
      say "-- the same with the context's default 1 KB thread stacks (WICK_CUDA_STACK=1024)"
      WICK_CUDA_STACK=1024 WICK_BENCH_TOPK=0 timeout 90 $B/bench_cuda model $f 4064 512 31 2>&1 |
        grep -E "^model" | tee -a "$LOG"
      first=0
    fi
    rm -f $f
  done
fi
say "== total $(since)"
