"""Our tokenizers give the same ids as Hugging Face's `tokenizers` (the reference implementation).

For every tokenizer.json under ../shared/data/tokenizers/hf: the first 500 lines of WikiText-2 (raw,
CRLF normalised to LF), each encoded without and with special tokens, must give identical ids; a few
hand-picked lines (special tokens, odd whitespace, NFC, contractions) too; and decoding our ids must
give Hugging Face's text. Runs mo_tool_tokenize from MO_TOOLS_DIR. Exits 0 on success.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from tokenizers import Tokenizer

TOOL = Path(os.environ["MO_TOOLS_DIR"]) / "mo_tool_tokenize"
DATA = Path(os.environ["MO_SHARED_DATA"])
HF_DIR = DATA / "tokenizers" / "hf"
WIKITEXT = DATA / "text" / "wikitext2-test-raw.txt"
N_LINES = 500

EXTRA = [
    "",
    " ",
    "   leading and trailing   ",
    "\t\ttabs\tand\nnew\n\nlines\r\n",
    "I'm sure they'LL say it's DON'T and we'd've",
    "3333333 12.5% $1,000,000 0x1F",
    "caf\u0065\u0301 \u00c5ngstr\u00f6m \u212b \u1100\u1161",  # NFC composes these
    "\u00a0nbsp \u0085nel \u180e mvs \u2028 ls",  # whitespace where regex engines differ
    "emoji \U0001F999 \U0001F468\u200d\U0001F469\u200d\U0001F467 \u2705",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01 \u043f\u0440\u0438\u0432\u0435\u0442 \u0645\u0631\u062d\u0628\u0627",
]
# Hugging Face finds added tokens in the text (our --parse-special) unless encode_special_tokens is set,
# which leaves special ones as text (our default).
SPECIAL = [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<s>[INST] hi [/INST] ok </s>",
    "<think>\nmaybe\n</think>\n\nno <tool_call>",
]


def run_tool(path, args, lines, json_input=True):
    stdin = "".join((json.dumps(line) if json_input else line) + "\n" for line in lines)
    res = subprocess.run([str(TOOL), str(path), *args, "--json"], input=stdin, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{TOOL} {path} {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
    out = res.stdout.split("\n")[: len(lines)]
    if len(out) != len(lines):
        raise RuntimeError(f"{TOOL} printed {len(out)} lines for {len(lines)} inputs")
    return out


def compare(name, tok, path, lines, args, add_special, split_special=False):
    got = run_tool(path, ["encode", *args], lines)
    tok.encode_special_tokens = split_special
    failures = 0
    ours = []
    for line, ids_text in zip(lines, got):
        ids = [int(x) for x in ids_text.split()]
        ours.append(ids)
        ref = tok.encode(line, add_special_tokens=add_special).ids
        if ids != ref:
            failures += 1
            if failures <= 5:
                print(f"FAIL {name} {' '.join(args) or '(add special)'}: {line[:70]!r}\n  ours {ids[:24]}\n  hf   {ref[:24]}")
    print(f"{name} encode {' '.join(args) or '(add special)'}: {len(lines) - failures}/{len(lines)} identical")
    return failures, ours


def compare_decode(name, tok, path, ids_per_line):
    got = run_tool(path, ["decode"], [" ".join(map(str, ids)) for ids in ids_per_line], json_input=False)
    failures = 0
    for ids, text in zip(ids_per_line, got):
        ours = json.loads(text)
        ref = tok.decode(ids, skip_special_tokens=True)
        if ours != ref:
            failures += 1
            if failures <= 5:
                print(f"FAIL {name} decode {ids[:12]}\n  ours {ours[:70]!r}\n  hf   {ref[:70]!r}")
    print(f"{name} decode: {len(ids_per_line) - failures}/{len(ids_per_line)} identical")
    return failures


def main():
    if not HF_DIR.is_dir() or not WIKITEXT.is_file():
        print(f"skipped: {HF_DIR} or {WIKITEXT} is missing")
        return 77
    text = WIKITEXT.read_bytes().decode("utf-8").replace("\r\n", "\n")
    wiki = text.split("\n")[:N_LINES]
    failures = 0
    for path in sorted(p.parent for p in HF_DIR.glob("*/tokenizer.json")):
        name = path.name
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        lines = wiki + EXTRA
        f, ours = compare(name, tok, path, lines, ["--no-special"], False)
        failures += f
        failures += compare(name, tok, path, lines, [], True)[0]
        failures += compare(name, tok, path, SPECIAL, ["--no-special", "--parse-special"], False)[0]
        failures += compare(name, tok, path, SPECIAL, ["--parse-special"], True)[0]
        failures += compare(name, tok, path, SPECIAL, ["--no-special"], False, split_special=True)[0]
        tok.encode_special_tokens = False
        failures += compare_decode(name, tok, path, ours[:N_LINES])
    if failures:
        print(f"{failures} mismatches")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
