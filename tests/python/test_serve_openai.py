#!/usr/bin/env python3
"""`model-optimizer serve` through the official `openai` client, on stories260K (and the SmolLM2 demo
model when scripts/fetch-demo-model.sh has fetched it).

- chat, completions, streaming (with include_usage), logprobs (chat top_logprobs, completions echo),
  stop strings, n=2, seed reproducibility, the API key, OpenAI-shaped errors;
- greedy output equals `model-optimizer generate` for the same prompt, alone and while 15 other
  requests run in the same batches;
- 64 concurrent streaming requests all finish with the right usage, and the KV cache is empty after;
- a client that disconnects mid-stream frees its sequence; SIGINT stops the server with exit code 0;
- completions' top_logprobs most likely first; /metrics already counts a request as ended when its
  response arrives; logit_bias bans and forces tokens; preemptions are logged with the request id;
- (SmolLM2) special tokens in completion prompts are parsed: a chat-formatted prompt gets the chat
  endpoint's prompt_tokens and reply; lm-eval's remote-tokenizer log-likelihood requests give what
  `model-optimizer eval` gives for the same chat-formatted items.
"""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

BIN = os.environ["MO_BINARY"]
SHARED = Path(os.environ["MO_SHARED_DATA"])
SOURCE = Path(os.environ.get("MO_SOURCE_DIR", Path(__file__).resolve().parents[2]))
STORIES = SHARED / "models" / "stories260K.gguf"
SMOLLM = SOURCE / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"  # scripts/fetch-demo-model.sh
KEY = "test-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`serve` on a free port; stop() sends SIGINT and returns the exit code and the output."""

    def __init__(self, model, *flags):
        self.port = free_port()
        self.proc = subprocess.Popen([BIN, "serve", "--model_path", str(model), "--port", str(self.port), *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 300
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("serve exited early:\n" + self.proc.stdout.read())
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("serve did not come up")
            time.sleep(0.1)

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, data

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body, headers=None):
        return self.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})

    def metrics(self):
        status, data = self.get("/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def wait_drained(self):
        # The loop updates its gauges after each step; a few steps after the last answer they read 0.
        for _ in range(600):
            m = self.metrics()
            if m["mo:num_requests_running"] == 0 and m["mo:num_requests_waiting"] == 0 and m["mo:kv_blocks_used"] == 0:
                return m
            time.sleep(0.05)
        return self.metrics()

    def stop(self, timeout=120):
        self.proc.send_signal(2)  # SIGINT
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out


def generate(model, prompt, max_tokens, chat=False):
    """Text that `model-optimizer generate` prints for a greedy run."""
    args = [BIN, "generate", str(model), "--prompt", prompt, "--max-tokens", str(max_tokens), "--temperature", "0"]
    r = subprocess.run(args + (["--chat"] if chat else []), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def check_basics(client, model):
    assert [m.id for m in client.models.list().data] == [model]

    c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=20, temperature=0)
    assert c.object == "text_completion" and len(c.choices) == 1
    assert c.choices[0].finish_reason in ("stop", "length")
    assert c.usage.completion_tokens <= 20 and c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens

    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=16, temperature=0)
    assert chat.object == "chat.completion" and chat.choices[0].message.role == "assistant"
    assert chat.usage.completion_tokens <= 16

    # Streaming gives the same text as the whole answer, and a last chunk with the usage.
    pieces, usage, finish = [], None, None
    for chunk in client.completions.create(model=model, prompt="Once upon a time", max_tokens=20, temperature=0, stream=True,
                                           stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            pieces.append(ch.text)
            finish = ch.finish_reason or finish
    assert "".join(pieces) == c.choices[0].text, ("".join(pieces), c.choices[0].text)
    assert usage.completion_tokens == c.usage.completion_tokens and usage.prompt_tokens == c.usage.prompt_tokens
    assert finish == c.choices[0].finish_reason

    chat_pieces = []
    for chunk in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=16,
                                                temperature=0, stream=True):
        for ch in chunk.choices:
            chat_pieces.append(ch.delta.content or "")
    assert "".join(chat_pieces) == chat.choices[0].message.content


def check_logprobs(client, model):
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=8, temperature=0,
                                          logprobs=True, top_logprobs=3)
    content = chat.choices[0].logprobs.content
    assert len(content) == chat.usage.completion_tokens
    for t in content:
        assert len(t.top_logprobs) == 3 and t.logprob <= 0
        # Greedy: the chosen token is the most likely one.
        assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5, t

    # What lm-evaluation-harness sends for log-likelihoods: echo the prompt, no new tokens.
    prompt = "The cat sat on the mat"
    c = client.completions.create(model=model, prompt=prompt, max_tokens=0, echo=True, logprobs=1)
    lp = c.choices[0].logprobs
    assert c.choices[0].text == prompt
    assert len(lp.tokens) == c.usage.prompt_tokens and c.usage.completion_tokens == 0
    assert lp.token_logprobs[0] is None and all(x is not None and x <= 0 for x in lp.token_logprobs[1:])
    # A generated token's logprob is the one echo gives it as part of a prompt.
    gen = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, logprobs=1)
    scored = client.completions.create(model=model, prompt=prompt + gen.choices[0].text, max_tokens=0, echo=True, logprobs=1)
    if scored.usage.prompt_tokens == c.usage.prompt_tokens + 1:  # the text tokenizes back to the same token
        assert abs(scored.choices[0].logprobs.token_logprobs[-1] - gen.choices[0].logprobs.token_logprobs[0]) < 1e-3
    # The prompt's log-likelihood does not depend on what is scored with it.
    c2 = client.completions.create(model=model, prompt=prompt, max_tokens=0, echo=True, logprobs=1)
    assert c2.choices[0].logprobs.token_logprobs == lp.token_logprobs


def check_eos_logprob(client, model):
    """lm-evaluation-harness's log-likelihood request (echo, logprobs 1, max_tokens 1) takes token_logprobs[ctxlen:-1]:
    when the generated token is EOS it must still be the last entry (as vLLM), while the text leaves it out."""
    # A prompt whose greedy continuation ends in EOS (which one does depends on the weights' rounding).
    starts = ["The capital of France is", "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n",
              "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"]
    for start in starts:
        first = client.completions.create(model=model, prompt=start, max_tokens=100, temperature=0, logprobs=1)
        if first.choices[0].finish_reason == "stop":
            break
    assert first.choices[0].finish_reason == "stop" and first.choices[0].logprobs.tokens[-1] == "<|im_end|>", first
    assert first.usage.completion_tokens == len(first.choices[0].logprobs.tokens)
    prompt = start + first.choices[0].text  # its greedy next token is EOS
    c = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, echo=True, logprobs=1)
    ch, lp = c.choices[0], c.choices[0].logprobs
    assert ch.finish_reason == "stop" and ch.text == prompt, ch
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == c.usage.prompt_tokens + 1, (len(lp.tokens), c.usage)
    assert lp.tokens[-1] == "<|im_end|>" and lp.token_logprobs[-1] < 0 and "<|im_end|>" in lp.top_logprobs[-1], lp.tokens[-3:]
    # The same entry when it is scored as part of the prompt.
    scored = client.completions.create(model=model, prompt=prompt + "<|im_end|>", max_tokens=0, echo=True, logprobs=1)
    assert scored.usage.prompt_tokens == c.usage.prompt_tokens + 1, (scored.usage, c.usage)  # "<|im_end|>" is one token
    assert abs(scored.choices[0].logprobs.token_logprobs[-1] - lp.token_logprobs[-1]) < 1e-3
    # Streaming: the EOS entry comes in a chunk's logprobs with no text.
    tokens, logprobs, text, finish = [], [], "", None
    for chunk in client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, logprobs=1, stream=True):
        for part in chunk.choices:
            text += part.text
            finish = part.finish_reason or finish
            if part.logprobs:
                tokens += part.logprobs.tokens
                logprobs += part.logprobs.token_logprobs
    assert text == "" and finish == "stop" and tokens == ["<|im_end|>"], (text, finish, tokens)
    assert abs(logprobs[0] - lp.token_logprobs[-1]) < 1e-4
    # Chat: the message leaves EOS out, its logprobs keep it.
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hi."}], max_tokens=64, temperature=0,
                                          logprobs=True)
    assert chat.choices[0].finish_reason == "stop" and "<|im_end|>" not in chat.choices[0].message.content
    assert chat.choices[0].logprobs.content[-1].token == "<|im_end|>" and len(chat.choices[0].logprobs.content) == chat.usage.completion_tokens
    print("  EOS keeps its logprob entry (completions, echo, streaming, chat): ok")


def check_stop_n_seed(client, model):
    base = client.completions.create(model=model, prompt="Once upon a time", max_tokens=30, temperature=0).choices[0].text
    words = base.split()
    stop = " " + words[len(words) // 2]
    cut = client.completions.create(model=model, prompt="Once upon a time", max_tokens=30, temperature=0, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == base[:base.index(stop)], (cut.choices[0].text, base, stop)

    two = client.completions.create(model=model, prompt="Once upon a time", max_tokens=12, temperature=1.0, n=2, seed=7)
    assert [ch.index for ch in two.choices] == [0, 1]
    again = client.completions.create(model=model, prompt="Once upon a time", max_tokens=12, temperature=1.0, n=2, seed=7)
    assert [ch.text for ch in two.choices] == [ch.text for ch in again.choices]
    other = client.completions.create(model=model, prompt="Once upon a time", max_tokens=12, temperature=1.0, n=2, seed=8)
    assert [ch.text for ch in other.choices] != [ch.text for ch in two.choices]


def check_same_as_generate(client, model_path, model):
    prompt, n = "Once upon a time, there was a little", 48
    expected = generate(model_path, prompt, n)
    alone = client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0).choices[0].text
    assert alone == expected, (alone, expected)
    expected_chat = generate(model_path, "Write a short story about a dog.", n, chat=True)

    def noise(i):
        return client.completions.create(model=model, prompt=f"Tom and Sue went to the park {i} times.", max_tokens=40 + i,
                                         temperature=0.8, seed=i).choices[0].text

    with ThreadPoolExecutor(16) as pool:
        others = [pool.submit(noise, i) for i in range(15)]
        target = pool.submit(lambda: client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0).choices[0].text)
        chat_target = pool.submit(lambda: client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Write a short story about a dog."}], max_tokens=n,
            temperature=0).choices[0].message.content)
        [f.result() for f in others]
        assert target.result() == expected, (target.result(), expected)
        assert chat_target.result() == expected_chat, (chat_target.result(), expected_chat)


def check_concurrent_streams(server, client, model, count=64, max_tokens=48):
    prompts = ["A" + " story" * k for k in range(8)]
    prompt_tokens = [client.completions.create(model=model, prompt=p, max_tokens=1).usage.prompt_tokens for p in prompts]

    def one(i):
        text, usage, finish = [], None, None
        stream = client.completions.create(model=model, prompt=prompts[i % 8], max_tokens=max_tokens, temperature=0.7, seed=i,
                                           stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for ch in chunk.choices:
                text.append(ch.text)
                finish = ch.finish_reason or finish
        return i, usage, finish

    peak = 0
    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(one, i) for i in range(count)]
        while not all(f.done() for f in futures):
            peak = max(peak, server.metrics()["mo:kv_blocks_used"])
            time.sleep(0.02)
        for f in futures:
            i, usage, finish = f.result()
            assert finish == "length" and usage.completion_tokens == max_tokens, (i, usage, finish)
            assert usage.prompt_tokens == prompt_tokens[i % 8], (i, usage)
    m = server.wait_drained()
    assert m["mo:kv_blocks_used"] == 0, m
    print(f"  {count} concurrent streams: all finished with usage; KV blocks used peaked at {peak:.0f}, back to 0")


def check_disconnect(server, model):
    before = server.metrics()["mo:generation_tokens_total"]
    sock = socket.create_connection(("127.0.0.1", server.port))
    body = json.dumps({"model": model, "prompt": "Once", "max_tokens": 400, "stream": True, "ignore_eos": True})
    sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
    received = b""
    while b"data:" not in received:
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    sock.close()
    m = server.wait_drained()
    assert m["mo:num_requests_running"] == 0 and m["mo:kv_blocks_used"] == 0, m
    print(f"  disconnect: {m['mo:generation_tokens_total'] - before:.0f} of 400 tokens generated before the sequence was freed")


def check_errors(server, model):
    def error(status_body):
        status, body = status_body
        return status, json.loads(body)["error"]

    status, e = error(server.post("/v1/completions", {"model": model, "prompt": "x"}, {"Authorization": "Bearer wrong"}))
    assert status == 401 and e["code"] == "invalid_api_key", e
    auth = {"Authorization": f"Bearer {KEY}"}
    status, e = error(server.post("/v1/completions", "{not json", auth))
    assert status == 400 and "not valid JSON" in e["message"], e
    status, e = error(server.post("/v1/completions", {"model": model, "prompt": "x", "top_p": 7}, auth))
    assert status == 400 and e["param"] == "top_p", e
    for path, body in (("/v1/completions", {"prompt": "x"}), ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})):
        status, e = error(server.post(path, {"model": "nope", **body}, auth))
        assert status == 404 and e["code"] == "model_not_found" and e["param"] == "model", e
        # Without "model" the request is for the served model (as vLLM and llama-server take it).
        status, data = server.post(path, {**body, "max_tokens": 2}, auth)
        assert status == 200 and json.loads(data)["model"] == model, data
    status, e = error(server.post("/v1/completions", {"model": model, "prompt": "word " * 20000}, auth))
    assert status == 400 and e["code"] == "context_length_exceeded", e
    status, e = error(server.request("GET", "/v1/nowhere", headers=auth))
    assert status == 404 and e["type"] == "not_found_error", e
    assert server.get("/health")[0] == 200  # no key needed outside /v1


def check_preemption():
    """A KV cache too small for the batch: sequences are preempted and recomputed, and the outputs do not change."""
    # memory_limit 1.116 GiB leaves the KV cache 82 blocks of 16 tokens (the start-up report says so): 5 sequences of
    # max_model_len 256, while the request below needs 16 x ~14 blocks at once.
    server = Server(STORIES, "--threads", "2", "--memory_limit", "1.116", "--max_model_len", "256", "--max_num_seqs", "16")
    model = STORIES.stem
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
    try:
        prompts = [f"Once upon a time, a girl named Sue had {i} cats." for i in range(16)]
        greedy = dict(model=model, max_tokens=200, temperature=0, extra_body={"ignore_eos": True})
        alone = [client.completions.create(prompt=p, **greedy).choices[0].text for p in prompts]
        assert server.metrics()["mo:num_preemptions_total"] == 0
        together = client.completions.create(prompt=prompts, **greedy)  # all 16 enter the batch at once
        for i, ch in enumerate(together.choices):
            assert ch.text == alone[i], (i, ch.text, alone[i])
        m = server.wait_drained()
        assert m["mo:num_preemptions_total"] > 0 and m["mo:kv_blocks_used"] == 0, m
    finally:
        _, out = server.stop()
    # One warning per preemption, at most one every 5 s: the request, the KV usage, and the count so far.
    warnings = [line for line in out.splitlines() if "preempted: the KV cache is full" in line]
    assert 1 <= len(warnings) <= m["mo:num_preemptions_total"], out[-3000:]
    assert re.search(r"request cmpl-[0-9a-f]+ \(choice \d+\) preempted: the KV cache is full \(\d+ of 82 blocks in use", warnings[0]), warnings
    print(f"  preemption: {m['mo:num_preemptions_total']:.0f} preemptions with 82 KV blocks; all 16 outputs equal to their runs alone; "
          f"logged: {warnings[0].split('] ', 1)[-1][:110]}...")


def check_graceful_stop():
    """SIGINT while a stream is in flight: the stream still finishes normally, then the process exits 0."""
    server = Server(STORIES, "--threads", "2", "--max_num_seqs", "4")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
    stream = client.completions.create(model=STORIES.stem, prompt="Once", max_tokens=1500, temperature=0, stream=True,
                                       stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    first = next(iter(stream))
    assert first.choices[0].text is not None
    server.proc.send_signal(2)
    usage, finish = None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
    assert finish == "length" and usage.completion_tokens == 1500, (finish, usage)
    out, _ = server.proc.communicate(timeout=120)
    assert server.proc.returncode == 0 and "SIGINT received" in out, out[-2000:]
    print("  SIGINT with a stream in flight: the stream finished (1500 tokens), exit 0")


def post_json(server, path, body):
    status, data = server.post(path, body, {"Authorization": f"Bearer {KEY}"})
    assert status == 200, (status, data)
    return json.loads(data)  # dicts keep the order the server wrote


def check_top_logprobs_order(server, model):
    """top_logprobs of /v1/completions list the most likely token first (clients take the first key), as vLLM and OpenAI."""
    for prompt in ("Once upon a time", "The little dog"):
        r = post_json(server, "/v1/completions", {"model": model, "prompt": prompt, "max_tokens": 3, "temperature": 0, "logprobs": 10})
        for top, lp in zip(r["choices"][0]["logprobs"]["top_logprobs"], r["choices"][0]["logprobs"]["token_logprobs"]):
            values = list(top.values())
            assert values == sorted(values, reverse=True), top
            assert abs(values[0] - lp) < 1e-5, (top, lp)  # greedy: the first key is the chosen token
    print("  completions top_logprobs: most likely first")


def check_metrics_current(server, client, model):
    """Read right after a response arrives, /metrics no longer counts the request as running or its KV blocks as used."""
    for i in range(12):
        if i % 3 == 2:
            for _ in client.completions.create(model=model, prompt=f"Tom had {i} dogs", max_tokens=12, temperature=0, stream=True):
                pass
        else:
            client.completions.create(model=model, prompt=f"Tom had {i} dogs", max_tokens=12, temperature=0, n=1 + i % 2)
        m = server.metrics()
        assert m["mo:num_requests_running"] == 0 and m["mo:num_requests_waiting"] == 0 and m["mo:kv_blocks_used"] == 0, (i, m)
    print("  /metrics right after 12 responses: 0 running, 0 waiting, 0 KV blocks used")


def tokenize(server, text, **extra):
    return post_json(server, "/tokenize", {"prompt": text, **extra})["tokens"]


def check_logit_bias(server, client, model):
    """logit_bias as vLLM: -100 bans a token, +100 forces it; the logprobs stay the model's own (raw)."""
    prompt = "Once upon a time"
    base = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, logprobs=5)
    first = base.choices[0].logprobs.tokens[0]
    ids = tokenize(server, prompt + base.choices[0].text)
    assert len(ids) == len(tokenize(server, prompt)) + 1, "the reply's text tokenizes back to one token"
    banned = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, logprobs=5,
                                       logit_bias={str(ids[-1]): -100})
    assert banned.choices[0].logprobs.tokens[0] != first, banned
    # Raw logprobs: the banned token is still the most likely one in the alternatives, with its own value.
    top = banned.choices[0].logprobs.top_logprobs[0]
    assert abs(top[first] - base.choices[0].logprobs.token_logprobs[0]) < 1e-5, (top, base)
    forced_id = tokenize(server, " cat")[-1]
    forced = client.completions.create(model=model, prompt=prompt, max_tokens=4, temperature=0.8, seed=3, logprobs=1,
                                       logit_bias={str(forced_id): 100})
    tokens = forced.choices[0].logprobs.tokens
    assert len(tokens) == 4 and len(set(tokens)) == 1, tokens
    forced_text = post_json(server, "/detokenize", {"tokens": [forced_id]})["prompt"].strip()
    assert forced_text == tokens[0].strip(), (forced_text, tokens)
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=3, temperature=0,
                                          logit_bias={str(forced_id): 100})
    assert chat.choices[0].message.content.replace(" ", "") == forced_text * 3, (chat.choices[0].message.content, forced_text)
    print(f"  logit_bias: banning {first!r} changes the greedy token, +100 on {tokens[0]!r} forces it")


def check_special_tokens_in_prompts(server, client, model, model_path):
    """A chat-formatted completion prompt is tokenized as the chat endpoint tokenizes it (llama-server, vLLM)."""
    raw = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    c = client.completions.create(model=model, prompt=raw, max_tokens=1, temperature=0)
    shown = subprocess.run([BIN, "inspect", str(model_path), "--tokenize", raw], capture_output=True, text=True, check=True).stdout.split()
    assert c.usage.prompt_tokens == len(shown) == 10, (c.usage, shown)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=0)
    ids = post_json(server, "/tokenize", {"messages": messages})["tokens"]
    assert len(ids) == chat.usage.prompt_tokens, (len(ids), chat.usage)
    text = post_json(server, "/detokenize", {"tokens": ids})["prompt"]
    assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n"), text
    comp = client.completions.create(model=model, prompt=text, max_tokens=24, temperature=0)
    assert comp.usage.prompt_tokens == chat.usage.prompt_tokens, (comp.usage, chat.usage)
    assert comp.choices[0].text == chat.choices[0].message.content, (comp.choices[0].text, chat.choices[0].message.content)
    # BOS is not doubled when the prompt starts with it (SmolLM2 adds none; its BOS text is <|im_start|>).
    assert tokenize(server, text) == ids
    print(f"  chat-formatted completion prompt: {comp.usage.prompt_tokens} tokens and the chat reply {comp.choices[0].text!r}")


def check_lm_eval_requests(server, model, model_path, items=6):
    """lm-eval 0.4.13's local-completions with the remote tokenizer (found through /tokenizer_info): context and
    context+continuation tokenized by /tokenize, the ids sent with echo, logprobs 1, max_tokens 1, the log-likelihood
    sum(token_logprobs[ctxlen:-1]). On chat-formatted ARC-Easy items it equals `model-optimizer eval`'s."""
    info = json.loads(server.get("/tokenizer_info")[1])  # open without the key, as in vLLM (lm-eval sends none)
    assert info["eos_token"] == "<|im_end|>" and info["chat_template"], info
    src = SHARED / "tasks" / "arc_easy.jsonl"
    task = Path(os.environ.get("TMPDIR", "/tmp")) / f"mo_chat_arc_{os.getpid()}.jsonl"
    rows = [json.loads(line) for line in src.read_text().splitlines()[:items]]
    with open(task, "w") as f:
        for row in rows:
            row["query"] = f"<|im_start|>user\n{row['query']}<|im_end|>\n<|im_start|>assistant\n"
            f.write(json.dumps(row) + "\n")
    try:
        tool = Path(os.environ["MO_TOOLS_DIR"]) / "mo_tool_task_logliks"
        out = subprocess.run([str(tool), str(model_path), str(task), "--threads", "2"], capture_output=True, text=True, check=True).stdout
        ours = [json.loads(line)["logliks"] for line in out.splitlines()]
    finally:
        task.unlink()
    worst = 0.0
    for row, expected in zip(rows, ours):
        for choice, want in zip(row["choices"], expected):
            ctx, cont = row["query"], " " + choice
            # TemplateLM._encode_pair: the context's trailing whitespace ("\n" after "assistant") moves to the continuation.
            n_spaces = len(ctx) - len(ctx.rstrip())
            ctx, cont = ctx[:len(ctx) - n_spaces], ctx[len(ctx) - n_spaces:] + cont
            ctx_ids = tokenize(server, ctx, add_special_tokens=False)
            whole = tokenize(server, ctx + cont, add_special_tokens=False)
            r = post_json(server, "/v1/completions", {"model": model, "prompt": whole, "temperature": 0, "max_tokens": 1, "logprobs": 1,
                                                      "seed": 1234, "echo": True})
            got = sum(r["choices"][0]["logprobs"]["token_logprobs"][len(ctx_ids):-1])
            worst = max(worst, abs(got - want))
            assert abs(got - want) < 2e-3 * max(1.0, abs(want)), (row["query"], choice, got, want)
    print(f"  lm-eval remote-tokenizer requests on {items} chat-formatted ARC-Easy items: log-likelihoods equal eval's "
          f"(largest difference {worst:.2e})")


def run(model_path, smollm=False):
    print(f"model {model_path.name}")
    server = Server(model_path, "--api_key", KEY, "--threads", "2", "--max_num_seqs", "64")
    model = model_path.stem
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=KEY, max_retries=0)
    try:
        check_basics(client, model)
        check_logprobs(client, model)
        check_top_logprobs_order(server, model)
        check_metrics_current(server, client, model)
        check_logit_bias(server, client, model)
        if smollm:
            check_eos_logprob(client, model)
            check_special_tokens_in_prompts(server, client, model, model_path)
            check_lm_eval_requests(server, model, model_path)
        check_stop_n_seed(client, model)
        check_same_as_generate(client, model_path, model)
        check_concurrent_streams(server, client, model, max_tokens=24 if smollm else 48)
        check_disconnect(server, model)
        check_errors(server, model)
        try:
            client.completions.create(model=model, prompt="word " * 20000, max_tokens=5)
            raise AssertionError("a prompt over max_model_len was accepted")
        except openai.BadRequestError as e:
            assert "maximum context length" in str(e)
    except BaseException:
        server.proc.kill()
        print(server.proc.communicate()[0])
        raise
    code, out = server.stop()
    assert code == 0, out
    for line in ("KV cache:", "max concurrent sequences at max_model_len", "loaded in", "weights"):
        assert line in out, out
    print("  start-up report and SIGINT stop (exit 0): ok")


def main():
    if not STORIES.exists():
        print(f"skipped: {STORIES} not found")
        return 77
    run(STORIES)
    check_preemption()
    check_graceful_stop()
    if not SMOLLM.exists():
        print(f"skipped SmolLM2: {SMOLLM} not fetched (scripts/fetch-demo-model.sh); the rest passed")
        return 77
    run(SMOLLM, smollm=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
