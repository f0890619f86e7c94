"""Our SentencePiece-style tokenizer against Hugging Face `tokenizers` on hf/llama2/tokenizer.json.

Every one of the first 500 lines of wikitext2-test-raw.txt (CRLF normalised to LF), plus a few lines
with added tokens, emoji and odd spacing, must encode to the same ids, with and without special tokens
(and with special-token text parsed or left as text), and those ids must decode to the same text, with
and without skipping special tokens. Exits 0 on success, 77 (skipped) without the shared data, 1 otherwise.
"""
import json
import os
import subprocess
import sys

from tokenizers import Tokenizer

N_LINES = 500
# Lines that exercise what wikitext lacks: added tokens in the text, byte fallback, odd spacing.
EXTRA_LINES = [
    "",
    " ",
    "   leading and trailing spaces   ",
    "Hello</s>world<s> again <unk>",
    "\t tab\u00a0nbsp",
    "emoji \U0001F680\U0001F469\u200d\U0001F4BB and CJK \u6211\u60f3\u5728apple\u5de5\u4f5c",
    "\u1780\u17b6\u1793\u17cb\u178f\u17c2",
    "ünïcödé façade naïve",
]


def run_tool(tool, tokenizer, args, lines):
    proc = subprocess.run([tool, tokenizer, *args], input="".join(l + "\n" for l in lines).encode(),
                          capture_output=True, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"FAIL: {tool} {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    out = proc.stdout.decode().split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        sys.exit(f"FAIL: {tool} {' '.join(args)} printed {len(out)} lines for {len(lines)} inputs")
    return out


def main():
    data = os.environ.get("MO_SHARED_DATA", "")
    tools = os.environ.get("MO_TOOLS_DIR", "")
    tokenizer_dir = os.path.join(data, "tokenizers", "hf", "llama2")
    text_path = os.path.join(data, "text", "wikitext2-test-raw.txt")
    tool = os.path.join(tools, "mo_tool_tokenize")
    # The build makes the tool: missing, it is a failure; the shared data may be absent: a skip (77).
    if not os.path.exists(tool):
        print(f"FAIL: {tool} not found; the build should have made it")
        return 1
    for path in (os.path.join(tokenizer_dir, "tokenizer.json"), text_path):
        if not os.path.exists(path):
            print(f"skipped: {path} not found")
            return 77

    with open(text_path, "rb") as f:
        raw = f.read().decode("utf-8").replace("\r\n", "\n")
    lines = raw.split("\n")[:N_LINES] + EXTRA_LINES
    ref = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    # tokenizers matches special tokens in the text unless split_special_tokens (encode_special_tokens)
    # is set: that is our parse_special = true / false.
    ref_split = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    ref_split.encode_special_tokens = True
    json_lines = [json.dumps(l) for l in lines]

    failures = 0
    for add_special, parse_special in ((True, True), (False, True), (True, False), (False, False)):
        args = ["encode", "--json"] + (["--parse-special"] if parse_special else []) + ([] if add_special else ["--no-special"])
        ours = run_tool(tool, tokenizer_dir, args, json_lines)
        expected = [(ref if parse_special else ref_split).encode(l, add_special_tokens=add_special).ids for l in lines]
        same = 0
        for i, (line, got, want) in enumerate(zip(lines, ours, expected)):
            got_ids = [int(x) for x in got.split()]
            if got_ids == want:
                same += 1
            else:
                failures += 1
                if failures <= 10:
                    print(f"encode add_special={add_special} parse_special={parse_special} line {i + 1}: {line!r}\n"
                          f"  expected {want}\n  got      {got_ids}")
        print(f"encode add_special={add_special} parse_special={parse_special}: {same}/{len(lines)} lines identical")
        if not parse_special:
            continue

        for skip in (True, False):
            ids_lines = [" ".join(map(str, ids)) for ids in expected]
            dargs = ["decode", "--json"] + ([] if skip else ["--keep-special"])
            decoded = [json.loads(x) for x in run_tool(tool, tokenizer_dir, dargs, ids_lines)]
            want_text = [ref.decode(ids, skip_special_tokens=skip) for ids in expected]
            same = sum(1 for a, b in zip(decoded, want_text) if a == b)
            for i, (a, b) in enumerate(zip(decoded, want_text)):
                if a != b:
                    failures += 1
                    if failures <= 10:
                        print(f"decode skip_special={skip} line {i + 1}:\n  expected {b!r}\n  got      {a!r}")
            print(f"decode add_special={add_special} skip_special={skip}: {same}/{len(lines)} lines identical")

    if failures:
        print(f"FAIL: {failures} differences from tokenizers {getattr(sys.modules['tokenizers'], '__version__', '?')}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
