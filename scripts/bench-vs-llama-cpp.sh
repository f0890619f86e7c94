#!/usr/bin/env bash
# Side-by-side CPU benchmark of our engine against llama.cpp (docs/performance.md).
#
#   scripts/bench-vs-llama-cpp.sh [--out FILE] [--runs N] [--threads N] [--serve] [--bandwidth] [--shapes]
#                                 [--all] [--no-engine] [--quick]
#
#   (default)    pp512 / tg128 of the demo model (SmolLM2-135M-Instruct) as F16, Q8_0, Q4_K_M, Q4_0 and Q4_1
#                GGUF: our mo_tool_bench_engine against llama-bench, alternating run by run; plus our AWQ
#                and GPTQ INT4 checkpoints (our engine only)
#   --serve      our `serve` against llama-server, loaded by `model-optimizer bench` (completions,
#                streaming, ignore_eos, 128 in / 64 out, concurrency 1,4,16, 32 prompts each) on the demo
#                model's Q4_0, Q4_K_M and Q4_1 files and on Q4_K_M random weights in Llama-3.2-1B's shape
#   --bandwidth  tg128 of random TinyLlama-1.1B-shaped weights (Q4_0, Q8_0) as effective GB/s, against a
#                STREAM triad measured here
#   --shapes     pp512 / tg128 and peak RSS on random-weight GGUFs of published shapes (Qwen2.5-0.5B,
#                Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B) in F16, BF16, Q8_0, Q4_K_M, Q5_K_M, Q6_K and Q4_0,
#                written by llama-quantize from a random F16 file (F16/BF16 up to 3B); a shape's files are
#                deleted after it is measured unless KEEP_SHAPE_FILES=1 (they take up to 30 GB a shape)
#   --all        --serve and --bandwidth too; --no-engine skips the default part; --quick: 1 run,
#                pp128/tg32, no AWQ/GPTQ
#   --out FILE   the Markdown report (default .cache/bench-vs-llama-cpp.md; overwritten)
#
# Env: BUILD_DIR (our build, default build/; built with scripts/build.sh when missing),
#      LLAMA_BENCH_ARGS (extra llama-bench flags, e.g. "--poll 0"; printed in the report),
#      LLAMA_CPP_PYTHON_VERSION (default 0.3.36), JOBS (llama.cpp build, default 2),
#      SHAPES / SHAPE_TYPES (--shapes: space-separated subsets, e.g. SHAPES=llama-3.2-1b SHAPE_TYPES="F16 Q4_K_M").
# Built once and kept in .cache/ (git-ignored): llama.cpp (.cache/llama.cpp/), the model files
# (.cache/bench-files/). Delete those to rebuild them. Servers listen on 127.0.0.1 only and are
# killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

out=.cache/bench-vs-llama-cpp.md
runs=3
threads=2
do_engine=1 do_serve=0 do_bw=0 do_shapes=0 quick=0
while (($#)); do
  case $1 in
    --out) out=$2; shift ;;
    --out=*) out=${1#--out=} ;;
    --runs) runs=$2; shift ;;
    --threads) threads=$2; shift ;;
    --serve) do_serve=1 ;;
    --bandwidth) do_bw=1 ;;
    --shapes) do_shapes=1 ;;
    --all) do_serve=1; do_bw=1 ;;
    --no-engine) do_engine=0 ;;
    --quick) quick=1; runs=1 ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-vs-llama-cpp: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

build=${BUILD_DIR:-build}
build=${build%/}
mo=$build/model-optimizer
tool=$build/tests/tools/mo_tool_bench_engine
if [ ! -x "$mo" ] || [ ! -x "$tool" ]; then
  if [ "$build" = build ]; then
    scripts/build.sh
  else
    echo "bench-vs-llama-cpp: $mo or $tool missing; build them (cmake --build $build --target model-optimizer mo_tool_bench_engine)" >&2
    exit 1
  fi
fi
py=.cache/venv/bin/python
[ -x "$py" ] || py=python3
helper=scripts/bench_vs_llama_cpp.py
files=.cache/bench-files
work=.cache/bench-work
mkdir -p "$files" "$work" "$(dirname "$out")"
pidfile=$work/servers.pid
: > "$pidfile"

# Servers are started by the helper in their own process groups; whatever happens to it, they go.
cleanup() {
  local pid
  while read -r pid; do
    # only if that pid is still one of our servers (a pid stopped earlier may have been reused)
    if [ -n "$pid" ] && grep -qaE 'llama-server|model-optimizer' "/proc/$pid/cmdline" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || true
    fi
  done < "$pidfile"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "[bench-vs-llama-cpp] $*" >&2; }
now() { date +%s; }
# Runs a model-optimizer command with its output in $work/NAME.log (its progress bars fill pages
# when stderr is not a terminal); shows the summary, or the end of the log when it fails.
logged() {  # name command...
  local name=$1 logf=$work/$1.log
  shift
  if ! "$@" > "$logf" 2>&1; then
    tail -n 30 "$logf" >&2
    echo "bench-vs-llama-cpp: $name failed (log: $logf)" >&2
    exit 1
  fi
  grep -v 'elapsed' "$logf" | tail -n 8 | sed 's/^/  /' >&2
}

# --- llama.cpp -------------------------------------------------------------------------------------
t0=$(now)
llama_bin=$(scripts/build-llama-cpp.sh)
llama_version=$(cat "$llama_bin/VERSION")
log "llama.cpp ready ($(( $(now) - t0 )) s)"

# --- random-weight files of published shapes (--shapes, --serve) -----------------------------------
sdir=$files/shapes
# Prints the path of shape $1 in type $2 (F16, BF16, Q4_K_M, ...), writing it first when missing: the F16
# file with random weights by our helper, every other type from it by llama-quantize.
shape_file() {  # shape type
  local s=$1 t=$2 src=$sdir/$1.F16.gguf f=$sdir/$1.$2.gguf
  mkdir -p "$sdir"
  if [ ! -s "$src" ]; then
    log "writing $src (random weights)"
    "$py" "$helper" shape-gguf --shape "$s" --output "$src" >&2
  fi
  if [ "$t" != F16 ] && [ ! -s "$f" ]; then
    log "llama-quantize $s $t"
    rm -f "$f.tmp"
    if ! "$llama_bin/llama-quantize" "$src" "$f.tmp" "$t" "$threads" > "$work/quantize-$s-$t.log" 2>&1; then
      tail -n 20 "$work/quantize-$s-$t.log" >&2
      echo "bench-vs-llama-cpp: llama-quantize $s $t failed (log: $work/quantize-$s-$t.log)" >&2
      exit 1
    fi
    mv "$f.tmp" "$f"
  fi
  echo "$f"
}

# --- model files, made with our tools --------------------------------------------------------------
# (the demo model's files: the default part and --serve use them)
if ((do_engine || do_serve)); then
  t0=$(now)
  q41=$(scripts/fetch-demo-model.sh)
  hf=$files/SmolLM2-135M-Instruct-F16-hf
  f16=$files/SmolLM2-135M-Instruct.F16.gguf
  if [ ! -d "$hf" ]; then
    log "converting the Q4_1 demo GGUF to an F16 HF directory"
    rm -rf "$hf.tmp"
    logged convert-hf "$mo" convert "$q41" "$hf.tmp" --dtype f16
    mv "$hf.tmp" "$hf"
  fi
  if [ ! -s "$f16" ]; then
    log "converting the HF directory to an F16 GGUF"
    rm -f "$f16.tmp.gguf"
    logged convert-f16 "$mo" convert "$hf" "$f16.tmp.gguf" --dtype f16
    mv "$f16.tmp.gguf" "$f16"
  fi
  gguf_from_hf() {  # gguf_type file
    [ -s "$2" ] && return 0
    log "quantize --quant_method gguf --gguf_type $1"
    rm -f "$2.tmp.gguf"*
    logged "quantize-$1" "$mo" quantize --model_path "$hf" --quant_method gguf --gguf_type "$1" --imatrix none \
      --no-eval --output_path "$2.tmp.gguf" --threads "$threads"
    mv "$2.tmp.gguf" "$2"
    rm -f "$2.tmp.gguf.decisions.jsonl"
  }
  q80=$files/SmolLM2-135M-Instruct.Q8_0.gguf
  q4km=$files/SmolLM2-135M-Instruct.Q4_K_M.gguf
  q40=$files/SmolLM2-135M-Instruct.Q4_0.gguf
  gguf_from_hf q8_0 "$q80"
  gguf_from_hf q4_k_m "$q4km"
  gguf_from_hf q4_0 "$q40"
  # AWQ / GPTQ INT4, group 64: SmolLM2's hidden size 576 is not a multiple of 128, so g128 would fall back.
  # Speed does not depend on calibration quality, so a small calibration set and no sensitivity fallback
  # (every linear INT4) keep this to a few minutes.
  awq=$files/SmolLM2-135M-Instruct-AWQ-INT4-g64
  gptq=$files/SmolLM2-135M-Instruct-GPTQ-INT4-g64
  int4_from_hf() {  # method dir
    [ -d "$2" ] && return 0
    log "quantize --quant_method $1 (INT4 g64; takes minutes, done once)"
    rm -rf "$2.tmp"
    logged "quantize-$1" "$mo" quantize --model_path "$hf" --quant_method "$1" --bits 4 --group_size 64 \
      --num_samples 32 --max_seq_len 256 --sensitivity_threshold 0 --no-eval \
      --output_path "$2.tmp" --threads "$threads"
    mv "$2.tmp" "$2"
  }
  if ((do_engine)) && ! ((quick)); then
    int4_from_hf awq "$awq"
    int4_from_hf gptq "$gptq"
  fi
  log "model files ready ($(( $(now) - t0 )) s)"
fi

# --- report ----------------------------------------------------------------------------------------
: > "$out"
say() { echo "$*"; echo "$*" >> "$out"; }
say "# model-optimizer vs llama.cpp, $(date -u '+%Y-%m-%d %H:%M UTC')"
say ""
say "- CPU: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1), $(nproc) cores visible ($("$mo" --version | sed -n 's/.*this cpu:[[:space:]]*//p')); $threads threads for both"
say "- ours: $("$mo" --version | head -n1), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' + uncommitted changes'), $build"
say "- llama.cpp: vendored in llama-cpp-python $llama_version ($("$llama_bin/llama-bench" --version 2>&1 | grep -m1 -i version || true))"
[ -n "${LLAMA_BENCH_ARGS:-}" ] && say "- extra llama-bench flags: \`$LLAMA_BENCH_ARGS\`"
say "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(uptime | sed 's/^ *//'))"
say ""

p=512 n=128  # prefill and decode lengths of the engine and --shapes parts
((quick)) && p=128 n=32

if ((do_engine)); then
  t0=$(now)
  say "## Prefill and decode (pp$p, tg$n), $runs runs each, alternating"
  say ""
  say "ours: \`mo_tool_bench_engine FILE -p $p -n 0 -t $threads -r 1\` and \`-p 0 -n $n\`; llama.cpp: \`llama-bench -m FILE -p $p -n 0 -t $threads -r 1 -o json\` and \`-p 0 -n $n\` (so tg starts at an empty context in both). tok/s are mean ± sd over the runs; peak RSS is the largest of the runs (of that process alone)."
  say ""
  args=(--model "F16=$f16" --model "Q8_0=$q80" --model "Q4_K_M=$q4km" --model "Q4_0=$q40" --model "Q4_1 (shipped)=$q41")
  if ! ((quick)); then
    args+=(--ours-only "AWQ INT4 g64=$awq" --ours-only "GPTQ INT4 g64=$gptq")
  fi
  "$py" "$helper" engine --ours "$tool" --llama-bench "$llama_bin/llama-bench" "${args[@]}" \
    -p "$p" -n "$n" --threads "$threads" --runs "$runs" --out "$out" --json "$work/engine.json"
  log "engine part: $(( $(now) - t0 )) s"
fi

if ((do_serve)); then
  t0=$(now)
  np=32 conc=1,4,16
  ((quick)) && np=8
  s1b=$(shape_file llama-3.2-1b Q4_K_M)
  k=0
  for spec in "Q4_0, demo model=$q40" "Q4_K_M, demo model=$q4km" "Q4_K_M, random weights in Llama-3.2-1B's shape=$s1b" \
              "Q4_1, the demo model as shipped=$q41"; do
    say "## Serving: \`model-optimizer serve\` vs \`llama-server\`, ${spec%%=*}"
    say ""
    say "\`model-optimizer bench --endpoint completions --stream --ignore-eos --input-len 128 --output-len 64 --concurrency $conc --num-prompts $np\` against each server in turn, both with $threads threads on 127.0.0.1; load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
    say ""
    # one folder per file: bench --out never replaces an earlier run's results
    k=$((k + 1))
    rm -rf "$work/serve-$k"
    "$py" "$helper" serve --mo "$mo" --llama-server "$llama_bin/llama-server" --model "${spec#*=}" --threads "$threads" \
      --concurrency "$conc" --num-prompts "$np" --input-len 128 --output-len 64 --workdir "$work/serve-$k" \
      --pidfile "$pidfile" --out "$out"
  done
  log "serve part: $(( $(now) - t0 )) s"
fi

if ((do_bw)); then
  t0=$(now)
  triad=.cache/bench-files/stream-triad
  if [ ! -x "$triad" ] || [ scripts/stream-triad.c -nt "$triad" ]; then
    gcc -O3 -march=native -fopenmp scripts/stream-triad.c -o "$triad"
  fi
  n=128 r=3
  ((quick)) && n=32 r=1
  shape=2048,22,32,4,5632,32000
  bw_args=()
  for t in q4_0 q8_0; do
    g=$files/random-tinyllama-shape.$t.gguf
    if [ ! -s "$g" ]; then
      log "writing $g (random weights, placeholder vocabulary) for llama-bench"
      "$py" "$helper" random-gguf --shape "$shape" --type "$t" --output "$g"
    fi
    bw_args+=(--gguf "$t=$g")
  done
  say "## Decode bandwidth: random TinyLlama-1.1B-shaped weights"
  say ""
  say "hidden 2048, 22 layers, 32 heads / 4 KV heads, ffn 5632, vocab 32000, untied output, every matrix (embedding and output too) in the one type. ours: \`mo_tool_bench_engine --dummy-shape $shape --type T -p 0 -n $n -t $threads -r 1\`; llama.cpp: \`llama-bench -p 0 -n $n -t $threads -r 1\` on a GGUF of the same shapes with random blocks (\`bench_vs_llama_cpp.py random-gguf\`); $r runs each, alternating. Bytes per token = every layer matrix + the output matrix (KV cache reads and the one embedding row left out). Triad: \`scripts/stream-triad.c\`, $threads OpenMP threads, 3 arrays of 256 MiB, best of 10 passes, just before and just after each type; the fraction is of the better of the two."
  say ""
  "$py" "$helper" bandwidth --ours "$tool" --triad "$triad" --threads "$threads" -n "$n" --runs "$r" \
    --llama-bench "$llama_bin/llama-bench" "${bw_args[@]}" --out "$out"
  log "bandwidth part: $(( $(now) - t0 )) s"
fi

if ((do_shapes)); then
  t0=$(now)
  say "## Real model shapes: random weights, pp$p and tg$n, $runs runs each, alternating"
  say ""
  say "Each shape's published configuration (\`bench_vs_llama_cpp.py shape-gguf\`: hidden size, layers, heads, KV heads, FFN width, vocabulary, q/k/v biases, tied output) with random normal weights (sd 0.02) in an F16 GGUF; every other type written from it by llama.cpp's \`llama-quantize\` (no imatrix); F16 and BF16 only up to 3B. Same commands as the demo table: \`mo_tool_bench_engine FILE -p $p -n 0\` / \`-p 0 -n $n\` against \`llama-bench -p $p -n 0\` / \`-p 0 -n $n\`, $threads threads."
  say ""
  summary=()
  for s in ${SHAPES:-qwen2.5-0.5b llama-3.2-1b llama-3.2-3b llama-3.1-8b}; do
    margs=()
    for t in ${SHAPE_TYPES:-F16 BF16 Q8_0 Q4_K_M Q5_K_M Q6_K Q4_0}; do
      if [ "$s" = llama-3.1-8b ] && { [ "$t" = F16 ] || [ "$t" = BF16 ]; }; then continue; fi
      f=$(shape_file "$s" "$t")
      margs+=(--model "$t=$f")
    done
    say "### $s ($(( $(stat -c %s "$sdir/$s.F16.gguf") / 1000000 )) MB as F16)"
    say ""
    say "- load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    say ""
    "$py" "$helper" engine --ours "$tool" --llama-bench "$llama_bin/llama-bench" "${margs[@]}" \
      -p "$p" -n "$n" --threads "$threads" --runs "$runs" --out "$out" --json "$work/shape-$s.json"
    summary+=(--json "$s=$work/shape-$s.json")
    [ -n "${KEEP_SHAPE_FILES:-}" ] || rm -f "$sdir/$s".*.gguf
  done
  say "### Ratios, every shape (mean of the runs; each run's ratio in brackets)"
  say ""
  say "- load average at the end of the shapes: $(cut -d' ' -f1-3 /proc/loadavg)"
  say ""
  "$py" "$helper" shapes-summary "${summary[@]}" --out "$out"
  log "shapes part: $(( $(now) - t0 )) s"
fi

say "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg) ($(uptime | sed 's/^ *//'))"
log "report written to $out"
