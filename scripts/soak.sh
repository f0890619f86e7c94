#!/usr/bin/env bash
# Soak test: `serve` under `bench` load at concurrency 8 for MINUTES (default 2), with mixed requests
# (completions and chat, streamed and not, short and long outputs). Passes when every request succeeded, the
# server's RSS stayed flat (the last sample within 20% + 16 MiB of the peak over the first quarter of the run,
# once every kind of request has been served) and, once the load stops, /metrics shows 0 running, 0 waiting
# and 0 KV blocks used.
#   scripts/soak.sh [MINUTES] [MODEL]      (default: 2 minutes on ../shared/data/models/stories260K.gguf)
# Prints one line per bench round and an RSS summary; exits 1 on a failure, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-2}
model=${2:-../shared/data/models/stories260K.gguf}
bin=${MO_BINARY:-build/model-optimizer}
[ -x "$bin" ] || { echo "soak: $bin not found; build first (scripts/build.sh)" >&2; exit 1; }
[ -e "$model" ] || { echo "soak: model $model not found" >&2; exit 1; }
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
"$bin" serve --model_path "$model" --port "$port" --threads 2 --max_num_seqs 16 > "$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 300); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.2; done
curl -sf "localhost:$port/health" >/dev/null || { echo "soak: serve did not come up:"; cat "$work/serve.log"; exit 1; }

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$server/status"; }
metric() { curl -sf "localhost:$port/metrics" | awk -v m="mo:$1" '$1 == m {print $2}'; }
( while kill -0 "$server" 2>/dev/null; do echo "$(date +%s) $(rss_kib)" >> "$work/rss"; sleep 2; done ) &
sampler=$!

start=$(date +%s)
end=$(( start + minutes * 60 ))
round=0 failed=0 requests=0
variants=("--endpoint completions --stream" "--endpoint chat --stream" "--endpoint completions --no-stream" "--endpoint chat --no-stream")
while [ "$(date +%s)" -lt "$end" ]; do
  v=${variants[$((round % 4))]}
  out_len=$(( round % 2 == 0 ? 32 : 128 ))
  # shellcheck disable=SC2086
  "$bin" bench --base-url "http://127.0.0.1:$port/v1" $v --concurrency 8 --num-prompts 48 --input-len 64 \
    --output-len "$out_len" --output-len-dist uniform --output-len-spread 0.5 --seed "$round" --warmup 0 --no-progress \
    --json > "$work/round.json" 2> "$work/round.err" || true
  read -r ok bad < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); s=j["levels"][0]["summary"]; print(s["completed"], s["failed"])' "$work/round.json" 2>/dev/null || echo "0 48")
  requests=$((requests + ok + bad)); failed=$((failed + bad)); round=$((round + 1))
  echo "soak: round $round ($v, output ~$out_len): $ok ok, $bad failed; serve RSS $(( $(rss_kib) / 1024 )) MiB"
  [ "$bad" -eq 0 ] || sed -n 1,20p "$work/round.err"
done
kill "$sampler" 2>/dev/null || true
for _ in $(seq 50); do [ "$(metric num_requests_running)" = "0" ] && break; sleep 0.1; done
running=$(metric num_requests_running) waiting=$(metric num_requests_waiting) used=$(metric kv_blocks_used)
last=$(tail -1 "$work/rss" | awk '{print $2}')
peak=$(awk '{print $2}' "$work/rss" | sort -n | tail -1)
early=$(awk -v until=$(( start + minutes * 15 )) '$1 <= until {print $2}' "$work/rss" | sort -n | tail -1)
echo "soak: $round rounds, $requests requests, $failed failed in $minutes min; serve RSS peak in the first quarter $((early / 1024)) MiB, peak $((peak / 1024)) MiB, last $((last / 1024)) MiB; after the load: $running running, $waiting waiting, $used KV blocks used"
status=0
[ "$failed" -eq 0 ] || { echo "soak: FAILED: $failed requests failed"; status=1; }
[ "$running" = "0" ] && [ "$waiting" = "0" ] && [ "$used" = "0" ] || { echo "soak: FAILED: the server did not drain"; status=1; }
[ "$last" -le $(( early * 12 / 10 + 16384 )) ] || { echo "soak: FAILED: RSS grew from $((early / 1024)) to $((last / 1024)) MiB"; status=1; }
kill -0 "$server" 2>/dev/null || { echo "soak: FAILED: serve exited:"; tail -20 "$work/serve.log"; status=1; }
exit $status
