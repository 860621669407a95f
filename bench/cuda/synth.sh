# Sourced by the device scripts: synth_models WICK DIR makes the synthetic
# parity models (every architecture x weight type at the tiny shape, a few
# real shapes with few layers) with WICK's mkmodel in DIR and prints their
# paths on one line.
synth_models() {
  local wick=$1 dir=$2 list="" arch ty f spec
  mkdir -p "$dir"
  for arch in llama qwen2 qwen3 gemma3; do
    for ty in f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs \
      fp8_e4m3 fp8_e5m2 q4_k_m; do
      f=$dir/$arch-tiny-$ty.gguf
      $wick mkmodel --arch $arch --like tiny --type $ty --seed 7 -o $f > /dev/null && list="$list $f"
    done
  done
  for spec in "llama smollm2 3 q4_k_m" "qwen2 smollm2 2 bf16" "qwen3 qwen3-0.6b 2 q4_k" \
    "gemma3 gemma3-270m 6 q4_k_m"; do
    set -- $spec
    f=$dir/$1-$2-$4.gguf
    $wick mkmodel --arch $1 --like $2 --layers $3 --type $4 -o $f > /dev/null && list="$list $f"
  done
  f=$dir/llama-8b1l-fp8.gguf
  $wick mkmodel --arch llama --like llama3-8b --layers 1 --vocab 32000 --type fp8_e4m3 -o $f \
    > /dev/null && list="$list $f"
  echo $list
}
