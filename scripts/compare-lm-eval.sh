#!/usr/bin/env bash
# lm-evaluation-harness 0.4.13 (`local-completions`, its remote tokenizer found through /tokenizer_info)
# against `serve`, next to `model-optimizer eval` on the same items: per-item log-likelihoods and acc.
# The items are the first ITEMS of a multiple-choice task file (query/choices/gold: arc_easy, piqa, copa,
# boolq), as they are (plain) or in ChatML ("<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n";
# chat), which also checks that special-token text is parsed alike on both paths.
#   scripts/compare-lm-eval.sh [MODEL] [TASK] [ITEMS] [chat|plain]   (default: the demo model, arc_easy, 200, chat)
# Installs lm-eval[api]==0.4.13 into .cache/lm-eval-venv on first use (no torch needed).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
task=${2:-arc_easy}
items=${3:-200}
format=${4:-chat}
case "$format" in chat|plain) ;; *) echo "compare-lm-eval: the format is chat or plain, not '$format'" >&2; exit 2;; esac
bin=${MO_BINARY:-build/model-optimizer}
tool=build/tests/tools/mo_tool_task_logliks
[ -x "$bin" ] && [ -x "$tool" ] || { echo "compare-lm-eval: build first (scripts/build.sh)" >&2; exit 1; }
venv=.cache/lm-eval-venv
if [ ! -x "$venv/bin/lm_eval" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "lm-eval[api]==0.4.13"
fi
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
"$venv/bin/python" - "$items" "$work" "$format" "$task" <<'PY'
import json, sys
items, work, chat = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "chat"
with open(f"../shared/data/tasks/{sys.argv[4]}.jsonl") as src, open(f"{work}/arc_easy_chat.jsonl", "w") as dst:
    for line in list(src)[:items]:
        row = json.loads(line)
        if chat:
            row["query"] = f"<|im_start|>user\n{row['query']}<|im_end|>\n<|im_start|>assistant\n"
        dst.write(json.dumps(row) + "\n")
with open(f"{work}/arc_easy_chat.yaml", "w") as f:
    f.write(f"""task: arc_easy_chat
dataset_path: json
dataset_kwargs:
  data_files:
    test: {work}/arc_easy_chat.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{query}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{gold}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
  - metric: acc_bytes
""")
PY
port=$((20000 + RANDOM % 20000))
name=$(basename "$model" .gguf)
"$bin" serve --model_path "$model" --port "$port" --threads 2 > "$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 300); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.2; done
start=$(date +%s.%N)
HF_DATASETS_OFFLINE=1 "$venv/bin/lm_eval" --model local-completions --tasks arc_easy_chat --include_path "$work" --batch_size 1 \
  --model_args "model=$name,base_url=http://127.0.0.1:$port/v1/completions,num_concurrent=4,max_retries=3" \
  --output_path "$work/out" --log_samples > "$work/lm_eval.log" 2>&1 || { cat "$work/lm_eval.log"; exit 1; }
lm_s=$(echo "$(date +%s.%N) - $start" | bc)
start=$(date +%s.%N)
"$tool" "$model" "$work/arc_easy_chat.jsonl" --threads 2 > "$work/ours.jsonl"
ours_s=$(echo "$(date +%s.%N) - $start" | bc)
grep -m1 "remote tokenizer" "$work/lm_eval.log" || true
"$venv/bin/python" - "$work" "$lm_s" "$ours_s" "$format" "$task" <<'PY'
import glob, json, sys
work, lm_s, ours_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
lm = {}
for line in open(glob.glob(f"{work}/out/**/samples_arc_easy_chat_*.jsonl", recursive=True)[0]):
    s = json.loads(line)
    lm[s["doc_id"]] = ([r[0] for r in s["filtered_resps"]], s)
ours = [json.loads(line) for line in open(f"{work}/ours.jsonl")]
worst, n = 0.0, 0
for o in ours:
    theirs, _ = lm[o["item"]]
    for a, b in zip(o["logliks"], theirs):
        worst, n = max(worst, abs(a - float(b))), n + 1
def accs(get):
    acc = norm = byts = 0
    for doc_id, (ll, s) in lm.items():
        ll = get(doc_id, ll)
        choices, gold = s["doc"]["choices"], s["doc"]["gold"]
        best = lambda xs: max(range(len(xs)), key=lambda i: (xs[i], -i))
        acc += best(ll) == gold
        norm += best([x / len(c) for x, c in zip(ll, choices)]) == gold
        byts += best([x / len(c.encode()) for x, c in zip(ll, choices)]) == gold
    return acc / len(lm), norm / len(lm), byts / len(lm)
lm_acc = accs(lambda d, ll: [float(x) for x in ll])
our_acc = accs(lambda d, ll: ours[d]["logliks"])
print(f"{len(lm)} {sys.argv[5]} items ({sys.argv[4]}), {n} continuations: largest |log-likelihood difference| {worst:.2e} nats")
print("| | acc | acc_norm | acc_bytes |\n|---|---:|---:|---:|")
print(f"| lm-eval 0.4.13 -> serve ({n} requests, {lm_s:.0f} s) | {lm_acc[0]:.3f} | {lm_acc[1]:.3f} | {lm_acc[2]:.3f} |")
print(f"| model-optimizer eval's scoring ({ours_s:.0f} s) | {our_acc[0]:.3f} | {our_acc[1]:.3f} | {our_acc[2]:.3f} |")
PY
