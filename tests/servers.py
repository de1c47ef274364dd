"""Real OpenAI-compatible servers for tests: vLLM on CPU and ``transformers serve``, started and stopped.

Not a test file. A test imports it as ``from tests.servers import ...``::

    with vllm_or_skip(model_dir) as server:
        httpx.post(server.base_url + "/v1/completions", json={"model": server.model, ...})

vLLM runs from its own virtualenv (``make .venv-vllm/.ready``; it pins an older transformers than the
main one), found at ``$GF2_VLLM_PYTHON`` or ``<repo>/.venv-vllm/bin/python``. Where that python is
absent, :func:`start_vllm_server` raises :class:`VLLMUnavailableError`; :func:`vllm_or_skip` turns that into
a pytest skip, unless ``GF2_REQUIRE_VLLM`` is set (as CI sets it), where the test fails instead.

Each server runs in its own process group with its output in a log file, so :meth:`Server.stop` ends
the API process and every engine/worker process it spawned, and a server that dies or never answers
is reported with the tail of its log.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.paths import REPO  # noqa: E402

VLLM_PYTHON_ENV = "GF2_VLLM_PYTHON"
REQUIRE_VLLM_ENV = "GF2_REQUIRE_VLLM"
DEFAULT_VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
# Offline, quiet, no telemetry; 2 GiB of KV cache is about 46,000 tokens of SmolLM2-135M in float32.
SERVER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "PYTHONUNBUFFERED": "1",
}


class ServerError(RuntimeError):
    """A server exited or did not become ready in time; the message holds its log tail."""


class VLLMUnavailableError(ServerError):
    """The vLLM virtualenv's python is not there."""


class Server:
    """A running server process group; ``base_url`` has no trailing slash, ``model`` is its model name."""

    def __init__(
        self, name: str, process: subprocess.Popen, base_url: str, model: str, log_path: Path
    ) -> None:
        self.name = name
        self.process = process
        self.base_url = base_url
        self.model = model
        self.log_path = log_path

    @property
    def pid(self) -> int:
        """The server's PID, which is also its process group's id."""
        return self.process.pid

    def alive(self) -> bool:
        """Whether any process of the server's group still exists."""
        return group_alive(self.pid)

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the server's combined stdout and stderr."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the whole process group, SIGKILL what is left after ``grace`` seconds, and reap it."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            if not self.alive():
                break
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if self.process.poll() is not None and not group_alive(self.pid):
                    break
                time.sleep(0.1)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Server({self.name!r}, pid={self.pid}, base_url={self.base_url!r})"


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a process (zombies of ours excepted once reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_python() -> Path:
    """The vLLM virtualenv's python; raises :class:`VLLMUnavailableError` where it is absent."""
    path = Path(os.environ.get(VLLM_PYTHON_ENV) or DEFAULT_VLLM_PYTHON)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise VLLMUnavailableError(
            f"no vLLM python at {path}: build it with `make .venv-vllm/.ready` or point "
            f"{VLLM_PYTHON_ENV} at one"
        )
    return path


def launch(
    name: str,
    argv: Sequence[str],
    base_url: str,
    model: str,
    ready_path: str,
    timeout: float,
    log_path: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> Server:
    """Start ``argv`` in a new process group, logging to a file, and wait until ``ready_path`` answers 200."""
    if log_path is None:
        fd, log_name = tempfile.mkstemp(prefix=f"gf2-{name}-", suffix=".log")
        os.close(fd)
        log_path = log_name
    log_path = Path(log_path)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **SERVER_ENV, **(env or {})},
            start_new_session=True,
        )
    server = Server(name, process, base_url, model, log_path)
    t0 = time.monotonic()
    while True:
        if process.poll() is not None:
            server.stop()
            raise ServerError(
                f"{name} server exited with status {process.returncode} before answering "
                f"{ready_path}; log {log_path}:\n{server.log_tail()}"
            )
        if ready(base_url + ready_path):
            return server
        if time.monotonic() - t0 > timeout:
            server.stop()
            raise ServerError(
                f"{name} server did not answer {ready_path} within {timeout:.0f} s; log {log_path}:\n"
                f"{server.log_tail()}"
            )
        time.sleep(0.5)


def ready(url: str) -> bool:
    """Whether ``GET url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def start_vllm_server(
    model_dir: str | Path,
    port: int | None = None,
    timeout: float = 240,
    max_model_len: int | None = None,
    served_model_name: str = "served",
    extra_args: Sequence[str] = (),
    log_path: str | Path | None = None,
) -> Server:
    """Start ``vllm``'s OpenAI API server on CPU for ``model_dir`` and wait for ``GET /health``.

    Chunked prefill is off: on CPU, a seeded request whose prefill is split over steps (a prompt
    longer than the 2048-token step budget, or several prompts at once) kills the engine with
    "CPU Generator does not use offset". ``max_model_len`` defaults to the model's own context (8192 for
    SmolLM2). Startup takes about a minute on 2 cores; the server's processes hold about 3.3 GB.
    """
    python = vllm_python()
    port = port or free_port()
    argv = [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", served_model_name,
        "--host", "127.0.0.1",
        "--port", str(port),
        *(["--max-model-len", str(max_model_len)] if max_model_len else []),
        "--dtype", "float32",
        "--no-enable-chunked-prefill",
        *extra_args,
    ]  # fmt: skip
    return launch("vllm", argv, f"http://127.0.0.1:{port}", served_model_name, "/health", timeout, log_path)


def transformers_cli() -> Path:
    """The ``transformers`` CLI beside this interpreter (the main virtualenv's), else on ``PATH``."""
    here = Path(sys.executable).parent / "transformers"
    if here.is_file():
        return here
    found = shutil.which("transformers")
    if found is None:
        raise ServerError("no `transformers` CLI: pip install 'transformers[serving]'")
    return Path(found)


def start_transformers_server(
    model_dir: str | Path,
    port: int | None = None,
    timeout: float = 120,
    extra_args: Sequence[str] = (),
    log_path: str | Path | None = None,
) -> Server:
    """Start ``transformers serve`` with ``model_dir`` preloaded on CPU and wait for ``GET /v1/models``.

    Needs ``transformers[serving]``. Starts in about 7 s; requests name the model by ``model_dir``
    (``Server.model``). It honours ``seed`` and ``temperature`` but ignores ``n`` and ``logprobs``
    (one choice, no logprobs, whatever is asked).
    """
    port = port or free_port()
    argv = [
        str(transformers_cli()), "serve", str(model_dir),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--device", "cpu",
        "--log-level", "info",
        *extra_args,
    ]  # fmt: skip
    return launch(
        "transformers", argv, f"http://127.0.0.1:{port}", str(model_dir), "/v1/models", timeout, log_path
    )


def _skip_or_fail(exc: VLLMUnavailableError) -> None:
    import pytest

    if os.environ.get(REQUIRE_VLLM_ENV):
        pytest.fail(f"{exc} ({REQUIRE_VLLM_ENV} is set, so this is a failure, not a skip)")
    pytest.skip(str(exc))


def vllm_or_skip(model_dir: str | Path, **kwargs: Any) -> Server:
    """:func:`start_vllm_server`, with a pytest skip where vLLM is not installed, unless CI requires it."""
    try:
        return start_vllm_server(model_dir, **kwargs)
    except VLLMUnavailableError as exc:
        _skip_or_fail(exc)
        raise


def vllm_or_skip_python() -> Path:
    """:func:`vllm_python`, with the same skip-unless-required rule as :func:`vllm_or_skip`."""
    try:
        return vllm_python()
    except VLLMUnavailableError as exc:
        _skip_or_fail(exc)
        raise
