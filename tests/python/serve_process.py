"""A `model-optimizer serve` child process on a free loopback port, for the Python tests."""
import contextlib
import os
import socket
import subprocess
import time
import urllib.request

BIN = os.environ["MO_BINARY"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving_process(model, *flags):
    """Yields (port, the Popen) once /health answers; SIGTERM and wait at the end."""
    port = free_port()
    proc = subprocess.Popen([BIN, "serve", "--model_path", str(model), "--port", str(port), *flags], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.time() < deadline, "serve did not come up: " + (proc.stderr.read() if proc.poll() is not None else "")
            time.sleep(0.1)
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@contextlib.contextmanager
def serving(model, *flags):
    """Yields the port once /health answers; SIGTERM and wait at the end."""
    with serving_process(model, *flags) as (port, _):
        yield port
