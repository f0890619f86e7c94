#!/usr/bin/env python3
"""`serve` on stories260K against clients that hold connections or walk away, loopback only, bounded:
- slowloris: 200 connections sending their headers a byte every second; /health, /metrics and a normal
  completion are still answered promptly (each connection has its own thread, up to max_connections);
- every connection slot held (max_connections 32) by 40 clients dripping their headers, or by 50 that send
  nothing: /health still answers within 1 s, as a new connection closes the one longest without its headers;
- read_timeout: a client dripping its headers, or its body, a byte at a time is disconnected once the
  headers (the body) took longer than read_timeout, though each byte came well within httplib's 5 s;
- 64 non-streaming requests of 1500 tokens whose clients disconnect at once: the sequences are freed
  (running and KV blocks back to 0 within 3 s, not after the generations end) and /health stays quick;
- SIGTERM with streams in flight past shutdown_timeout: every stream still ends with a finish_reason
  chunk, its usage and `data: [DONE]`, and the process exits 0.
"""
import json
import signal
import subprocess
import os
import socket
import sys
import threading
import time
from pathlib import Path

from serve_process import BIN, free_port, serving

STORIES = Path(os.environ["MO_SHARED_DATA"]) / "models" / "stories260K.gguf"


def get(port, path, timeout=5):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return int(out.split(b" ", 2)[1]), out[out.find(b"\r\n\r\n") + 4:].decode()


def post(port, body, timeout=30):
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return int(out.split(b" ", 2)[1])


def metric(port, name):
    for line in get(port, "/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def timed(fn):
    start = time.time()
    result = fn()
    return result, time.time() - start


def check_slowloris(port):
    stop = threading.Event()
    socks = []
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)

    def drip():
        while not stop.is_set():
            for s in socks:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
            stop.wait(1.0)

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        time.sleep(2)  # the 200 connections are open and dripping
        # Bounds that only catch a hang: the point is that the 200 slow clients do not hold these up.
        (status, _), took = timed(lambda: get(port, "/health", timeout=30))
        assert status == 200 and took < 30, (status, took)
        status, took = timed(lambda: post(port, {"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 8}))
        assert status == 200 and took < 30, (status, took)
        # The gauges are published before a response's last byte: right after it, nothing runs.
        assert metric(port, "mo:num_requests_running") == 0 and metric(port, "mo:kv_blocks_used") == 0, "requests running or KV blocks held"
        print(f"ok   200 slow connections: /health answered, a completion in {took:.2f} s")
    finally:
        stop.set()
        dripper.join()
        for s in socks:
            s.close()


def health_seconds(port):
    """Seconds /health took to answer 200 (at most 10, as a failure)."""
    start = time.time()
    try:
        status, _ = get(port, "/health", timeout=10)
    except OSError:
        return 10.0
    return time.time() - start if status == 200 else 10.0


def check_slots_full():
    with serving(STORIES, "--threads", "2", "--max_connections", "32") as port:
        for label, sent, count in (("dripping their headers", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n", 40), ("silent", b"", 50)):
            socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
            stop = threading.Event()

            def drip():  # a header byte every 0.5 s, each well within httplib's 5 s read timeout
                while sent and not stop.is_set():
                    for s in socks:
                        try:
                            s.sendall(b"X")
                        except OSError:
                            pass  # closed by the server
                    stop.wait(0.5)

            for s in socks:
                s.sendall(sent)
            dripper = threading.Thread(target=drip, daemon=True)
            dripper.start()
            try:
                time.sleep(1)
                took = health_seconds(port)  # the first: silent clients are dropped after 5 s anyway
                # Making room takes about 0.5 s (the grace a new connection gets); waiting for a slot to free
                # took 4.5 s (silent) to 58 s (dripping) before it. 3 s tells them apart on a loaded machine.
                assert took < 3, f"/health took {took:.1f} s with the 32 slots held by {count} connections {label}"
                print(f"ok   32 slots held by {count} connections {label}: /health in {took:.3f} s")
            finally:
                stop.set()
                dripper.join()
                for s in socks:
                    s.close()


def closed_after(s, drip, limit):
    """Drips a byte every 0.25 s until the server closes the connection; the seconds that took."""
    start = time.time()
    s.settimeout(0.25)
    while time.time() - start < limit:
        try:
            s.sendall(drip)
            if s.recv(65536) == b"":
                return time.time() - start
        except socket.timeout:
            continue
        except OSError:
            return time.time() - start
    raise AssertionError(f"the connection was still open after {limit} s")


def check_read_timeout():
    with serving(STORIES, "--threads", "2", "--read_timeout", "2") as port:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        took = closed_after(s, b"X", 30)
        assert took > 1.5, f"closed after {took:.1f} s, before read_timeout"  # each byte came within 0.25 s
        s.close()
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        took_body = closed_after(s, b" ", 30)
        assert took_body > 1.5, f"closed after {took_body:.1f} s, before read_timeout"
        s.close()
        status, took_ok = timed(lambda: post(port, {"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 8}))
        assert status == 200, status
        print(f"ok   read_timeout 2 s: headers dripped closed after {took:.1f} s, a dripped body after {took_body:.1f} s; "
              f"a normal completion still 200")


def check_abandoned(port):
    body = json.dumps({"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True}).encode()
    for _ in range(64):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                  + body)
        s.close()  # the client walks away
    # Each abandoned request takes up to 1,500 tokens if nobody notices the client left: the whole batch
    # would run for minutes. Noticed within 100 ms each, they are gone in seconds; 30 s bounds a hang.
    started = time.time()
    while True:
        status, _ = get(port, "/health", timeout=30)
        assert status == 200, status
        if metric(port, "mo:num_requests_running") == 0 and metric(port, "mo:kv_blocks_used") == 0:
            break
        assert time.time() - started < 30, "abandoned requests still run"
        time.sleep(0.2)
    print(f"ok   64 abandoned non-streaming requests freed within {time.time() - started:.1f} s")


def open_stream(port, max_tokens):
    body = json.dumps({"model": "stories260K", "prompt": "Once upon a time", "max_tokens": max_tokens, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return s


def read_all(s):
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    return out.decode()


def check_sigterm_streams():
    port = free_port()
    proc = subprocess.Popen([BIN, "serve", "--model_path", str(STORIES), "--port", str(port), "--threads", "2", "--shutdown_timeout", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while True:
        try:
            if get(port, "/health")[0] == 200:
                break
        except OSError:
            pass
        assert proc.poll() is None and time.time() < deadline, "serve did not come up"
        time.sleep(0.1)
    streams = [open_stream(port, 2000) for _ in range(4)]
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    for s in streams:
        text = read_all(s)
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        assert events and events[-1] == "[DONE]", text[-500:]
        finishes = [c["finish_reason"] for e in events[:-1] for c in json.loads(e).get("choices", []) if c.get("finish_reason")]
        usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
        assert finishes in (["abort"], ["length"]) and usage and usage[-1]["completion_tokens"] > 0, (finishes, usage, text[-300:])
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-2000:]
    print("ok   SIGTERM past shutdown_timeout: 4 streams ended with finish_reason abort, usage and [DONE]; exit 0")


def main():
    if not STORIES.exists():  # the shared data is absent: skipped (77), as docs/building.md says
        print(f"skipped: {STORIES} not found")
        return 77
    with serving(STORIES, "--threads", "2", "--max_num_seqs", "8") as port:
        check_slowloris(port)
        check_abandoned(port)
    check_slots_full()
    check_read_timeout()
    check_sigterm_streams()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
