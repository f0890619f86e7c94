#!/usr/bin/env python3
"""Renders every chat template in tests/data/chat_templates with Python's jinja2 (set up as HF
transformers sets it up, see make_chat_goldens.py) and with our C++ renderer (mo_tool_chat_render), and
checks that they agree byte for byte, for the golden conversations and more: other turn counts,
special characters, newlines, Unicode, add_generation_prompt off. Also checks that the checked-in
goldens are still what jinja2 renders, that the feature cases agree, and the ChatML fallback (empty template only).

Environment: MO_TOOLS_DIR (where mo_tool_chat_render is), MO_SOURCE_DIR. Exits 0 when all agree.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, str(HERE))
import make_chat_goldens as mk  # noqa: E402

SOURCE_DIR = Path(os.environ.get("MO_SOURCE_DIR", HERE.parent.parent))
DATA = SOURCE_DIR / "tests" / "data" / "chat_templates"
TOOL = Path(os.environ.get("MO_TOOLS_DIR", SOURCE_DIR / "build" / "tests" / "tools")) / "mo_tool_chat_render"

SYSTEM = mk.SYSTEM
U, A = "user", "assistant"


def msg(role, content):
    return {"role": role, "content": content}


EXTRA_CONVERSATIONS = {
    "one_turn": {"messages": [msg(U, "Hi")]},
    "system_one_turn": {"messages": [SYSTEM, msg(U, "Hi")]},
    "five_turns": {"messages": [SYSTEM, msg(U, "one"), msg(A, "two"), msg(U, "three"), msg(A, "four"), msg(U, "five")]},
    "assistant_last": {"messages": [msg(U, "Hello"), msg(A, "Hi there, how can I help?")]},
    "special_chars": {"messages": [
        {"role": "system", "content": "Use {{ braces }} and {% tags %} and {# this #} literally."},
        msg(U, "Quotes ' \" and a backslash \\ and\ttab\nnew line\r\nCRLF and \\n escaped"),
        msg(A, "  padded with spaces  \n\n"),
        msg(U, "<|im_end|> </s> [INST] <<SYS>> <|eot_id|>"),
    ]},
    "unicode": {"messages": [
        msg(U, "Café – naïve 日本語 😀 Ελληνικά עברית"),
        msg(A, "\u3000全角スペース\u00a0\u2003"),
        msg(U, "\u00a0¿Qué tal?\u2028"),
    ]},
    "empty_content": {"messages": [msg(U, ""), msg(A, ""), msg(U, "x")]},
    "reasoning_last": {"messages": [msg(U, "Q1"), msg(A, "<think>\nr1\n</think>\n\nA1"), msg(U, "Q2"),
                                    msg(A, "<think>\nr2\n</think>\n\nA2")]},
    "reasoning_field": {"messages": [msg(U, "Q1"), {"role": "assistant", "content": "A1", "reasoning_content": "because"},
                                     msg(U, "Q2")]},
    "thinking_off": {"messages": mk.THREE_TURNS, "enable_thinking": False},
    "two_tool_calls": {"messages": [
        msg(U, "Weather in Paris and Rome?"),
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"id": "call00002", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call00001", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call00002", "content": "rain"},
        msg(A, "Paris is sunny, Rome is rainy."),
        msg(U, "<tool_response>not a tool</tool_response>"),
    ], "tools": mk.TOOLS},
    "unknown_role": {"messages": [msg(U, "Q"), msg("critic", "meh"), msg(U, "Q2")]},
    "not_alternating": {"messages": [msg(U, "a"), msg(U, "b")]},
}


def run_batch(jobs):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(jobs, f, ensure_ascii=False)
        path = f.name
    try:
        out = subprocess.run([str(TOOL), "--batch", path], capture_output=True, check=True)
    finally:
        os.unlink(path)
    return json.loads(out.stdout.decode("utf-8"))


def raised_text(error):
    return error[len("TemplateError: "):] if error.startswith("TemplateError: ") else error


def agree(expected_output, expected_error, result, must_refuse=False):
    """None when our result matches jinja2's, else what differs."""
    if must_refuse:
        if result.get("kind") == "unsupported":
            return None
        return f"expected kind 'unsupported', got {result}"
    if expected_error is None:
        if "output" not in result:
            return f"jinja2 rendered {expected_output!r} but we failed: {result.get('kind')}: {result.get('message')}"
        if result["output"] != expected_output:
            return f"jinja2: {expected_output!r}\n      ours: {result['output']!r}"
        return None
    if "output" in result:
        return f"jinja2 failed ({expected_error}) but we rendered {result['output']!r}"
    raised = expected_error.startswith("TemplateError: ")
    if raised and (result["kind"] != "raised" or result["message"] != expected_error[len("TemplateError: "):]):
        return f"jinja2 raised {expected_error!r}, we: {result['kind']}: {result['message']!r}"
    if not raised and result["kind"] == "raised":
        return f"jinja2 failed with {expected_error!r}, we raised {result['message']!r}"
    return None


def main():
    if not TOOL.exists():
        sys.exit(f"{TOOL} not found (set MO_TOOLS_DIR)")
    manifest = json.loads((DATA / "goldens.json").read_text(encoding="utf-8"))
    templates = {name: (DATA / t["file"]).read_bytes().decode("utf-8") for name, t in manifest["templates"].items()}
    failures = []

    # 1. The checked-in goldens are what jinja2 renders today.
    for case in manifest["cases"]:
        t = manifest["templates"][case["template"]]
        context = mk.chat_context(manifest["conversations"][case["conversation"]], t["bos_token"], t["eos_token"])
        output, error = mk.render(templates[case["template"]], context)
        want = (DATA / case["golden"]).read_bytes().decode("utf-8") if "golden" in case else None
        if output != want or error != case.get("error"):
            failures.append(f"golden {case['template']}/{case['conversation']} is stale: jinja2 now gives "
                            f"{output!r} / {error!r}; rerun make_chat_goldens.py")

    # 2. Every template, every conversation, with and without the generation prompt.
    jobs, expected, labels = [], [], []
    conversations = dict(manifest["conversations"], **EXTRA_CONVERSATIONS)
    for name, t in manifest["templates"].items():
        for conv_name, conv in conversations.items():
            for add_gen in (True, False):
                context = mk.chat_context(conv, t["bos_token"], t["eos_token"], add_gen)
                jobs.append({"template": templates[name], "context": context})
                expected.append(mk.render(templates[name], context) + (False,))
                labels.append(f"{name} / {conv_name} / add_generation_prompt={add_gen}")

    # 3. One construct at a time.
    for case in json.loads((DATA / "features.json").read_text(encoding="utf-8")):
        output, error = mk.render(case["template"], case["context"])
        jobs.append({"template": case["template"], "context": case["context"]})
        expected.append((output, error, case["name"].startswith("unsupported:")))
        labels.append(f"feature {case['name']!r}")

    results = run_batch(jobs)
    for label, (output, error, refuse), result in zip(labels, expected, results):
        problem = agree(output, error, result, refuse)
        if problem:
            failures.append(f"{label}: {problem}")
    print(f"{len(jobs)} renderings compared with jinja2 {mk.jinja2.__version__}")

    with tempfile.TemporaryDirectory() as tmp:
        # 4. The tool's file mode (template file + context JSON, rendering on stdout) on every golden.
        for case in manifest["cases"]:
            t = manifest["templates"][case["template"]]
            context = Path(tmp) / "case.json"
            context.write_text(json.dumps(mk.chat_context(manifest["conversations"][case["conversation"]],
                                                          t["bos_token"], t["eos_token"]), ensure_ascii=False),
                               encoding="utf-8")
            out = subprocess.run([str(TOOL), str(DATA / t["file"]), str(context)], capture_output=True)
            label = f"file mode {case['template']}/{case['conversation']}"
            if "golden" in case and (out.returncode != 0 or out.stdout != (DATA / case["golden"]).read_bytes()):
                failures.append(f"{label}: rc={out.returncode} stdout={out.stdout!r} stderr={out.stderr!r}")
            if "error" in case and (out.returncode != 3 or raised_text(case["error"]) not in out.stderr.decode()):
                failures.append(f"{label}: expected exit 3 and {case['error']!r}, got rc={out.returncode} {out.stderr!r}")

        # 5. render_chat: ChatML with a warning when there is no template; one that cannot run is an error, as is raise_exception.
        context = Path(tmp) / "context.json"
        context.write_text(json.dumps(mk.chat_context(manifest["conversations"]["system"], "<s>", "</s>")), encoding="utf-8")
        chatml = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in mk.CONVERSATIONS["system"]["messages"])
        chatml += "<|im_start|>assistant\n"
        for label, text in (("macro", "{% macro f() %}x{% endmacro %}{{ f() }}"), ("empty", "")):
            path = Path(tmp) / f"{label}.jinja"
            path.write_text(text, encoding="utf-8")
            out = subprocess.run([str(TOOL), "--fallback", str(path), str(context)], capture_output=True)
            if label == "empty" and (out.returncode != 0 or out.stdout.decode() != chatml or b"ChatML" not in out.stderr):
                failures.append(f"fallback for an empty template: rc={out.returncode} stdout={out.stdout!r} stderr={out.stderr!r}")
            if label == "macro" and (out.returncode != 3 or b"'macro' tag is not supported" not in out.stderr or out.stdout):
                failures.append(f"a template that cannot run is not an error: rc={out.returncode} stdout={out.stdout!r} stderr={out.stderr!r}")
        out = subprocess.run([str(TOOL), "--fallback", str(DATA / "mistral_legacy.jinja"), str(context)], capture_output=True)
        if out.returncode != 3 or b"Conversation roles must alternate" not in out.stderr:
            failures.append(f"raise_exception under render_chat: rc={out.returncode} stderr={out.stderr!r}")

    for f in failures:
        print("FAIL", f)
    if failures:
        sys.exit(f"{len(failures)} differences from jinja2")
    print("all agree")


if __name__ == "__main__":
    main()
