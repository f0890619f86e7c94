#!/usr/bin/env python3
"""Makes tests/data/chat_templates: the chat templates models ship (<name>.jinja, byte for byte) and
what Python's jinja2 renders from them (<name>[.<conversation>].golden.txt), plus features.json, small
templates with jinja2's output for each Jinja construct the C++ renderer supports. goldens.json lists
every case; the C++ unit tests and tests/python/test_chat_template_reference.py read it.

jinja2 is set up as HF transformers' apply_chat_template sets it up (chat_template_utils.py,
_compile_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension and a {% generation %} tag, tojson replaced by json.dumps(ensure_ascii=False,
...), and the globals raise_exception and strftime_now. Variables: messages, tools, documents,
add_generation_prompt and the tokenizer's bos_token / eos_token.

    .cache/venv/bin/python tests/python/make_chat_goldens.py [--shared-data DIR] [--model-cache DIR]

Templates come from the shared tokenizer data and the demo model when present; Llama-2 and Mistral
are not there and are kept below as published. A missing source keeps the checked-in .jinja file.
"""

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = Path(__file__).resolve().parent
SOURCE_DIR = HERE.parent.parent
OUT_DIR = SOURCE_DIR / "tests" / "data" / "chat_templates"

# meta-llama/Llama-2-7b-chat-hf tokenizer_config.json "chat_template" (the shared llama2 tokenizer
# config has none), as JSON text.
LLAMA2_JSON = r"""
"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
"""

# mistralai/Mistral-7B-Instruct-v0.2 tokenizer_config.json "chat_template" since 2024 (optional
# system message folded into the first [INST]).
MISTRAL_JSON = r"""
"{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n"
"""

# The first template of Mistral-7B-Instruct-v0.1/v0.2 (and Mixtral-8x7B-Instruct-v0.1): no system role.
MISTRAL_LEGACY_JSON = r"""
"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
"""

# mistralai's "v3" template with tool calling (Mistral-7B-Instruct-v0.3, Mistral-Large-Instruct-2407),
# as copied in llama.cpp's tests/test-chat-template.cpp.
MISTRAL_V3_JSON = r"""
"{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (message.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and message.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}\n            {{- raise_exception(\"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns.index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools %}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", \"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n                    {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"' }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }}\n                    {%- endif %}\n                    {%- if not loop.last %}\n                        {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n                {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message.tool_calls is defined and message.tool_calls is not none %}\n        {{- \"[TOOL_CALLS] [\" }}\n        {%- for tool_call in message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n                {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n            {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is defined and message.content.content is defined %}\n            {%- set content = message.content.content %}\n        {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- raise_exception(\"Only user and assistant roles are supported, with the exception of an initial optional system message!\") }}\n    {%- endif %}\n{%- endfor %}\n"
"""

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
THREE_TURNS = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Germany?"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]
TOOL_TURNS = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call00001",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call00001", "content": '{"temperature": 18.5, "condition": "sunny"}'},
    {"role": "assistant", "content": "It is sunny and 18.5 °C in Paris."},
    {"role": "user", "content": "Should I take an umbrella?"},
]
REASONING_TURNS = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\n2 + 2 = 4."},
    {"role": "user", "content": "And 3 + 3?"},
]

# Conversations: the template variables besides add_generation_prompt, bos_token and eos_token.
CONVERSATIONS = {
    "system": {"messages": [SYSTEM] + THREE_TURNS},
    "no_system": {"messages": THREE_TURNS},
    "tools": {"messages": [SYSTEM] + TOOL_TURNS, "tools": TOOLS},
    "reasoning": {"messages": REASONING_TURNS},
}


def hf_config(name):
    return ("hf", name)


# name -> (source, conversations to render, where it comes from)
TEMPLATES = {
    "llama2": (("inline", LLAMA2_JSON, hf_config("llama2")), ["system", "no_system"],
               "meta-llama/Llama-2-7b-chat-hf tokenizer_config.json"),
    "llama3": (hf_config("llama3"), ["system", "no_system"], "shared data tokenizers/hf/llama3/tokenizer_config.json"),
    "qwen3": (hf_config("qwen3"), ["system", "no_system", "tools", "reasoning"],
              "shared data tokenizers/hf/qwen3/tokenizer_config.json"),
    "mistral": (("inline", MISTRAL_JSON, ("tokens", "<s>", "</s>")), ["system", "no_system"],
                "mistralai/Mistral-7B-Instruct-v0.2 tokenizer_config.json"),
    "mistral_legacy": (("inline", MISTRAL_LEGACY_JSON, ("tokens", "<s>", "</s>")), ["system", "no_system"],
                       "mistralai/Mistral-7B-Instruct-v0.1 / early v0.2 tokenizer_config.json"),
    "mistral_v3": (("inline", MISTRAL_V3_JSON, ("tokens", "<s>", "</s>")), ["system", "no_system", "tools"],
                   "mistralai v3 template (Mistral-7B-Instruct-v0.3) as in llama.cpp tests/test-chat-template.cpp"),
    "phi3": (("gguf", "tokenizers/llama-cpp-vocab/ggml-vocab-phi-3.gguf"), ["system", "no_system"],
             "shared data tokenizers/llama-cpp-vocab/ggml-vocab-phi-3.gguf tokenizer.chat_template"),
    "smollm2": (("model", "SmolLM2-135M-Instruct.Q4_1.gguf"), ["system", "no_system"],
                "SmolLM2-135M-Instruct.Q4_1.gguf tokenizer.chat_template (scripts/fetch-demo-model.sh)"),
}


class GenerationTag(Extension):
    """transformers' {% generation %} tag (AssistantTracker); it renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def chat_context(conversation, bos_token, eos_token, add_generation_prompt=True):
    """The variables transformers gives a chat template."""
    context = {"messages": conversation["messages"], "tools": None, "documents": None,
               "add_generation_prompt": add_generation_prompt, "bos_token": bos_token, "eos_token": eos_token}
    context.update({k: v for k, v in conversation.items() if k != "messages"})
    return context


def render(template, context):
    """(output, None) or (None, error message) from jinja2."""
    try:
        return make_environment().from_string(template).render(**context), None
    except jinja2.exceptions.TemplateError as e:
        return None, f"{type(e).__name__}: {e.message}"
    except Exception as e:  # TypeError, ZeroDivisionError, ... raised while rendering
        return None, f"{type(e).__name__}: {e}"


def read_gguf(path):
    from gguf import GGUFReader

    reader = GGUFReader(str(path))

    def field_str(key):
        f = reader.fields.get(key)
        return None if f is None else bytes(f.parts[f.data[0]]).decode("utf-8")

    def token(key):
        f = reader.fields.get(key)
        if f is None:
            return ""
        tokens = reader.fields["tokenizer.ggml.tokens"]
        return bytes(tokens.parts[tokens.data[int(f.parts[f.data[0]][0])]]).decode("utf-8")

    return field_str("tokenizer.chat_template"), token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id")


def token_text(value):
    if isinstance(value, dict):
        return value.get("content") or ""
    return value or ""


def load(source, shared, models):
    """(template or None when the source is missing, bos_token, eos_token)."""
    kind = source[0]
    if kind == "inline":
        template = json.loads(source[1])
        _, bos, eos = load(source[2], shared, models)
        return template, bos, eos
    if kind == "tokens":
        return None, source[1], source[2]
    if kind == "hf":
        path = shared / "tokenizers" / "hf" / source[1] / "tokenizer_config.json"
        if not path.exists():
            return None, None, None
        config = json.loads(path.read_text(encoding="utf-8"))
        return config.get("chat_template"), token_text(config.get("bos_token")), token_text(config.get("eos_token"))
    path = (shared / source[1]) if kind == "gguf" else (models / source[1])
    if not path.exists():
        return None, None, None
    return read_gguf(path)


# Small templates, one construct each, with jinja2's output: the C++ unit tests check them all. Names
# starting "error:" are templates jinja2 refuses; "unsupported:" ones jinja2 renders but the C++
# subset must refuse with a clear error.
CHAT = {"messages": [SYSTEM] + THREE_TURNS, "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True}
FEATURES = [
    ("text", "plain text", {}),
    ("output", "a{{ x }}b", {"x": "X"}),
    ("undefined prints nothing", "[{{ missing }}]", {}),
    ("undefined attribute of a dict prints nothing", "[{{ d.nope }}]", {"d": {}}),
    ("none and bools", "{{ none }} {{ true }} {{ false }} {{ None }} {{ True }}", {}),
    ("numbers", "{{ 1 + 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 * 3 - 1 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 6 / 2 }}", {}),
    ("floats", "{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 2.0 }} {{ 1.5e15 }} {{ 1e16 }} {{ x }}", {"x": 3.25}),
    ("string escapes", "{{ 'a\\nb\\t\"c\"' }}|{{ \"it's\" }}|{{ 'caf\\u00e9' }}", {}),
    ("adjacent strings", "{{ 'a' 'b' \"c\" }}", {}),
    ("comment", "a{# gone #}b", {}),
    ("trim_blocks", "{% if true %}\nx\n{% endif %}\ny", {}),
    ("lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", {}),
    ("lstrip_blocks leaves output tags", "a\n    {{ 'b' }}\n  {# c #}\nd", {}),
    ("minus trims", "a   {{- 'b' -}}   c  {%- if true -%}  d  {%- endif %}  \n e", {}),
    ("plus keeps", "a\n  {%+ if true %}b{% endif +%}\nc", {}),
    ("trailing newline dropped", "{{ 'a' }}\n", {}),
    ("whitespace control mixed", "  {%- if true %}\n  x  \n  {%- endif -%}\n\n  y {#- c -#}  z\n\t{% if true %}\t\n{% endif %}w\n  {% if true -%}\n   v{%- endif %}", {}),
    ("lstrip only when the tag starts the line", "ab  {% if true %}x{% endif %}  \n  {% if true %}y{% endif %}\n{{ 'z' }}", {}),
    ("comment lines vanish", "a\n  {# comment #}\nb\n{#- c2 #}\nc", {}),
    ("unicode whitespace before minus", "a\u3000\xa0{{- 'b' -}}\u2003c", {}),
    ("tag-like text in strings", "{{ '{{ x }}' }} {{ \"%}\" }} {{ '#}' }}", {}),
    ("nested braces in output", "{{ {'a': {'b': [1, {'c': 2}]}} }}", {}),
    ("newline inside a string literal", "{{ 'a\nb' }}|{{ 'c\\\nd' }}", {}),
    ("numbers with underscores and hex", "{{ 1_000 + 0x10 + 0o7 + 0b11 }} {{ 1_0.5 }} {{ 2e3 }}", {}),
    ("dotted integer index", "{{ l.1 }}{{ t.0.0 }}", {"l": ["a", "b"], "t": [["x"]]}),
    ("crlf normalized", "a\r\nb\rc", {}),
    ("raw block", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("if elif else", "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("loop variables", "{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {"items": ["a", "b", "c"]}),
    ("loop previtem nextitem cycle", "{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }};{% endfor %}", {}),
    ("for else", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for over undefined is empty", "{% for x in nothing %}x{% else %}none{% endfor %}", {}),
    ("for with a condition", "{% for x in [1, 2, 3, 4] if x % 2 == 0 %}{{ loop.index }}:{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", {}),
    ("for over dict and items", "{% for k in d %}{{ k }};{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %}", {"d": {"x": 1, "y": "z"}}),
    ("for over a string", "{% for c in 'héllo' %}{{ c }}.{% endfor %}", {}),
    ("nested loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("break continue", "{% for n in [1, 2, 3, 4, 5] %}{% if n == 2 %}{% continue %}{% endif %}{% if n == 4 %}{% break %}{% endif %}{{ n }}{% endfor %}", {}),
    ("set scoping", "{% set a = 1 %}{% for x in [1, 2] %}{{ a }}{% set a = a + x %}{{ a }};{% endfor %}{{ a }}{% if true %}{% set b = 3 %}{% endif %}{{ b }}", {}),
    ("set tuple", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c, d = 'xy' %}{{ c }}{{ d }}", {}),
    ("set block", "{% set x %}in {{ 'block' }}{% endset %}[{{ x }}]{% set y | upper %}shout{% endset %}{{ y }}", {}),
    ("filter block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}", {}),
    ("generation block", "{% generation %}kept {{ 1 }}{% endgeneration %}", {}),
    ("namespace", "{% set ns = namespace(total=0, seen=false) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}{% if x == 2 %}{% set ns.seen = true %}{% endif %}{% endfor %}{{ ns.total }} {{ ns.seen }}", {}),
    ("namespace attribute added", "{% set ns = namespace() %}{% set ns.a = 'x' %}{{ ns.a }}{{ ns['a'] }}", {}),
    ("comparisons", "{{ 1 < 2 }}{{ 2 <= 1 }}{{ 'a' == 'a' }}{{ 'a' != 'a' }}{{ 3 > 2 }}{{ 1 >= 1 }}{{ 1 < 2 < 3 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'b' > 'abc' }}", {}),
    ("equality of containers", "{{ [1, 2] == [1, 2] }}{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}{{ m == msgs[0] }}{{ none == none }}{{ x == y }}", {"msgs": [{"role": "user"}], "m": {"role": "user"}}),
    ("logic", "{{ true and false }}{{ true or false }}{{ not true }}{{ not (1 == 2) }}{{ 0 or 'x' }}{{ 'a' and 'b' }}{{ '' and 'b' }}|{{ not 1 == 2 }}", {}),
    ("in", "{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in d }}{{ 'q' not in d }}{{ 1 in nothing }}", {"d": {"k": 1}}),
    ("tests", "{{ x is defined }}{{ y is defined }}{{ y is not defined }}{{ y is undefined }}{{ n is none }}{{ s is string }}{{ x is number }}{{ x is integer }}{{ 1.5 is float }}{{ d is mapping }}{{ l is sequence }}{{ l is iterable }}{{ true is boolean }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'ab' is lower }}{{ n is sameas none }}{{ 'a' is in 'abc' }}{{ 2 is eq 2 }}{{ 1 is lt 2 }}{{ 'x' is equalto 'x' }}{{ range is callable }}", {"x": 1, "n": None, "s": "s", "d": {}, "l": [1]}),
    ("conditional expression", "{{ 'yes' if flag else 'no' }}[{{ 'a' if false }}]{{ 'p' if 0 else 'q' if 1 else 'r' }}", {"flag": True}),
    ("concat operator", "{{ 'n=' ~ 3 ~ none ~ missing ~ [1] }}", {}),
    ("plus and times", "{{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [0] * 2 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 'a' ~ 1 * 2 }} {{ 10 - 2 - 3 }} {{ 2 * 3 % 4 }}", {}),
    ("filter binds tighter than plus", "{{ '<' + '  x  ' | trim + '>' }}", {}),
    ("indexing and slicing", "{{ l[0] }}{{ l[-1] }}[{{ l[9] }}]{{ l[1:] }}{{ l[:-1] }}{{ l[::-1] }}{{ l[::2] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[-2] }}{{ l[5:9] }}{{ 'héllo'[1] }}", {"l": [1, 2, 3], "s": "abcd"}),
    ("attribute and item access", "{{ m.role }}{{ m['role'] }}{{ m.content.text }}{{ msgs[0].role }}{{ t.0 }}", {"m": {"role": "user", "content": {"text": "hi"}}, "msgs": [{"role": "system"}], "t": ["first"]}),
    ("string methods", "{{ '  x  '.strip() }}|{{ '--x--'.strip('-') }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'x  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abc'.find('c') }}{{ 'abc'.find('z') }}{{ 'abab'.count('ab') }}|{{ '-'.join(['a', 'b']) }}|{{ '42'.isdigit() }}{{ ' '.isspace() }}", {}),
    ("qwen-style reasoning split", "{% set c = m.split('</think>')[-1].lstrip('\\n') %}{% set r = m.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}[{{ r }}][{{ c }}]", {"m": "<think>\nstep one\n</think>\n\nanswer"}),
    ("dict methods", "{{ d.keys() | list }}{{ d.values() | list }}{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.get('z') }}", {"d": {"a": 1, "b": [2]}}),
    ("filters on strings", "{{ '  x  ' | trim }}|{{ 'ab' | upper }}{{ 'AB' | lower }}{{ 'ab cd' | title }}{{ 'aB' | capitalize }}|{{ 'aXa' | replace('a', 'b') }}|{{ 'héllo' | length }}{{ 'abc' | count }}|{{ 'abc' | first }}{{ 'abc' | last }}|{{ 'abc' | reverse }}|{{ 'ab' | list }}", {}),
    ("filters on lists", "{{ [3, 1, 2] | sort }}{{ ['b', 'A', 'c'] | sort }}{{ [3, 1, 2] | sort(reverse=true) }}{{ [1, 2, 1] | unique | list }}{{ [1, 2] | join(',') }}{{ [1, 2] | reverse | list }}{{ [1, 2, 3] | sum }}{{ [4, 9, 2] | min }}{{ [4, 9, 2] | max }}{{ [] | first }}|{{ [1, 2] | length }}", {}),
    ("default filter", "{{ x | default('d') }} {{ '' | default('d', true) }} {{ none | default('d') }} {{ 0 | d(5) }} {{ y | default(1) }}", {"y": 2}),
    ("int float string abs round", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 3 | float }} {{ 5 | string }}{{ none | string }} {{ -3 | abs }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 7 | round }}", {}),
    ("tojson", "{{ d | tojson }}|{{ 'é\"<>&' | tojson }}|{{ [1, 2.5, none, true] | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ {} | tojson }}{{ [] | tojson(indent=2) }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ d | tojson(separators=(',', ':')) }}", {"d": {"b": [1, {"c": None}], "a": "x\ny"}}),
    ("selectattr map select", "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }}{{ (msgs | selectattr('role', 'equalto', 'user') | list)[-1].content }}|{{ msgs | map(attribute='role') | join(',') }}|{{ msgs | rejectattr('role', 'equalto', 'user') | map(attribute='role') | list }}|{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 2, 3, 4] | reject('odd') | list }}|{{ items | selectattr('on') | map(attribute='n') | list }}|{{ ['a', 'b'] | map('upper') | list }}|{{ msgs | map(attribute='missing', default='-') | join }}", {"msgs": CHAT["messages"], "items": [{"n": 1, "on": True}, {"n": 2, "on": False}, {"n": 3}]}),
    ("dictsort and attr", "{{ d | dictsort }}{{ d | dictsort(by='value', reverse=true) }}{{ (d | attr('items'))() | list }}", {"d": {"b": 1, "a": 2}}),
    ("indent", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}", {}),
    ("escape and safe", "{{ '<a href=\"x\">&\\'</a>' | escape }} {{ '<b>' | safe }} {{ '<i>' | e }}", {}),
    ("range", "{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(5, 0, -2) | list }}{% for i in range(2) %}{{ i }}{% endfor %}", {}),
    ("dict and list literals", "{{ {'a': 1, 'b': [1, 'x', none]} }} {{ [1, 'two', 3.0, (4, 5), (6,)] }} {{ {'k': 'it\\'s'} }} {{ ('a',) }} {{ () }}", {}),
    ("dict global", "{{ dict(a=1, b='x') }}", {}),
    ("repr of strings in containers", "{{ ['a\\'b', \"c\\\"d\", 'e\\nf', 'mixed\\'\"'] }}", {}),
    ("unicode text", "{{ s }}|{{ s | length }}|{{ s[::-1] }}|{{ s | upper }}|{{ ('\\u3000' ~ s ~ '\\xa0') | trim }}", {"s": "Café ☕ 日本 😀"}),
    ("messages loop", "{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", CHAT),
    ("bos and eos", "{{ bos_token }}x{{ eos_token }}", CHAT),
    ("error: raise_exception", "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}", CHAT),
    ("error: raise_exception with concatenation", "{{ raise_exception('Unknown role: ' + messages[1].role) }}", CHAT),
    ("strftime_now is defined", "{{ strftime_now is defined }}{{ strftime_now('%Y') | length }}", {}),
    ("unknown filter inside if is fine until used", "{% if false %}{{ x | nosuchfilter }}{% endif %}ok", {}),
    # Errors jinja2 raises; the C++ renderer must throw ChatTemplateError too.
    ("error: attribute of undefined", "{{ nothing.attr }}", {}),
    ("error: str plus int", "{{ 'a' + 1 }}", {}),
    ("error: concat binds tighter than plus", "{{ 'a' ~ 1 + 2 }}", {}),
    ("error: undefined plus str", "{{ nothing + 'a' }}", {}),
    ("error: division by zero", "{{ 1 / 0 }}", {}),
    ("error: unknown tag", "{% frobnicate %}", {}),
    ("error: unknown filter", "{{ 'x' | nosuchfilter }}", {}),
    ("error: unknown filter used inside if", "{% if true %}{{ 'x' | nosuchfilter }}{% endif %}", {}),
    ("error: unknown test", "{{ 'x' is nosuchtest }}", {}),
    ("error: unclosed block", "{% if true %}x", {}),
    ("error: unclosed tag", "{{ 'x' ", {}),
    # Valid Jinja outside the subset: the C++ renderer must refuse it (kUnsupported), never render it wrong.
    ("unsupported: macro", "{% macro f() %}x{% endmacro %}{{ f() }}", {}),
    ("unsupported: call block", "{% macro f() %}[{{ caller() }}]{% endmacro %}{% call f() %}x{% endcall %}", {}),
    ("unsupported: printf formatting", "{{ '%s!' % 'x' }}", {}),
    ("unsupported: wordwrap filter", "{{ 'a b' | wordwrap(1) }}", {}),
    ("unsupported: str.format", "{{ '{}!'.format('x') }}", {}),
    ("error: set attribute of a dict", "{% set d = {'a': 1} %}{% set d.a = 2 %}{{ d.a }}", {}),
    ("error: iterate a number", "{% for x in 3 %}{% endfor %}", {}),
    ("error: compare str and int", "{{ 'a' < 1 }}", {}),
    ("error: tojson of undefined", "{{ nothing | tojson }}", {}),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared-data", type=Path,
                        default=Path(os.environ.get("MO_SHARED_DATA", SOURCE_DIR.parent / "shared" / "data")))
    parser.add_argument("--model-cache", type=Path, default=SOURCE_DIR / ".cache" / "models")
    args = parser.parse_args()

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    manifest = {"generator": "tests/python/make_chat_goldens.py", "jinja2": jinja2.__version__,
                "conversations": CONVERSATIONS, "templates": {}, "cases": []}
    previous_path = OUT_DIR / "goldens.json"
    previous = json.loads(previous_path.read_text(encoding="utf-8"))["templates"] if previous_path.exists() else {}
    for name, (source, conversations, origin) in TEMPLATES.items():
        template, bos, eos = load(source, args.shared_data, args.model_cache)
        path = OUT_DIR / f"{name}.jinja"
        if template is None:
            print(f"{name}: source missing, keeping {path.name}", file=sys.stderr)
            template = path.read_bytes().decode("utf-8")
        else:
            path.write_bytes(template.encode("utf-8"))
        if bos is None or eos is None:  # the tokenizer config or GGUF is missing: keep the recorded tokens
            bos, eos = previous[name]["bos_token"], previous[name]["eos_token"]
        manifest["templates"][name] = {"file": path.name, "bos_token": bos, "eos_token": eos, "source": origin}
        for conv in conversations:
            context = chat_context(CONVERSATIONS[conv], bos, eos)
            output, error = render(template, context)
            case = {"template": name, "conversation": conv}
            if error is None:
                golden = f"{name}.golden.txt" if conv == "system" else f"{name}.{conv}.golden.txt"
                (OUT_DIR / golden).write_bytes(output.encode("utf-8"))
                case["golden"] = golden
            else:
                case["error"] = error
            manifest["cases"].append(case)
            print(f"{name} / {conv}: {'error: ' + error if error else case['golden']}")
    (OUT_DIR / "goldens.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    features = []
    for name, template, context in FEATURES:
        output, error = render(template, context)
        entry = {"name": name, "template": template, "context": context}
        if error is None:
            entry["output"] = output
        else:
            entry["error"] = error
        if name.startswith("error:") != (error is not None):
            sys.exit(f"feature case {name!r}: expected {'an error' if name.startswith('error:') else 'output'}, got {error or output!r}")
        features.append(entry)
    (OUT_DIR / "features.json").write_text(json.dumps(features, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(features)} feature cases")


if __name__ == "__main__":
    main()
