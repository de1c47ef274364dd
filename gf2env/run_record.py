"""``run.json``: what a command that writes results ran, with what, where, and how it ended.

:func:`run_record` wraps a command's work: on entry it writes ``OUT/run.json`` with ``status: running``
(the resolved config, the command line, gf2env's version and git commit, Python's and the key packages'
versions, the seeds, the host), on exit it rewrites it with the end time and ``ok`` or ``failed``. Each
write is atomic (a temporary file, then ``os.replace``). A folder's earlier records are kept: ``run.json``
holds the latest run, and under ``previous`` the runs before it, oldest first (a resumed run, or another
command into the same folder); a record still ``running`` there is a run that was killed. A ``run.json``
that is not a record is moved aside to ``run.json.unreadable-STAMP``, never overwritten. A run refused
for its input (:data:`REFUSALS`) before it wrote anything, where no record was before, leaves nothing.

Nothing here imports the libraries it names: versions come from ``importlib.metadata``, the GPUs from
``torch.cuda`` only when torch is loaded and CUDA already initialized, else from ``nvidia-smi``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.version import __version__

RECORD_FILE = "run.json"
#: The distributions whose versions a record names, where installed.
PACKAGES = (
    "gymnasium", "numpy", "torch", "trl", "transformers", "accelerate", "peft", "datasets", "vllm",
    "stable-baselines3",
)  # fmt: skip
#: Config keys whose values are never written (credentials), e.g. ``api_key``, ``hf_token``.
SECRET_KEY = re.compile(r"(^|_)(api_key|secret|password|token)$", re.IGNORECASE)
#: Seconds a probe (``git``, ``nvidia-smi``) may take before the record goes without it.
PROBE_TIMEOUT_S = 5.0
_MAX_DEPTH = 32
#: A body's refusals (of its input; ImportError: a missing extra): raised before it wrote anything, in a
#: folder without an earlier record, they leave nothing (no record, no folder the record made), as a
#: refused command leaves nothing.
REFUSALS = (GF2ConfigError, RecordFormatError, ImportError)


def plain(value: object, depth: int = 0) -> Any:
    """``value`` as JSON: dataclasses and mappings as objects, sequences and sets as lists, paths as
    text, non-finite floats as text (``"nan"``), anything else as its ``repr``. Never raises."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > _MAX_DEPTH:
        return _repr(value)
    if isinstance(value, enum.Enum):
        return plain(value.value, depth + 1)
    if isinstance(value, os.PathLike):
        return os.fspath(value) if isinstance(os.fspath(value), str) else _repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        return _plain_items(items, depth)
    if isinstance(value, Mapping):
        return _plain_items(value, depth)
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v, depth + 1) for v in value), key=repr)
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # numpy scalars and arrays
        try:
            return plain(value.tolist(), depth + 1)
        except Exception:
            return _repr(value)
    return _repr(value)


def _plain_items(items: Mapping[Any, Any], depth: int) -> dict[str, Any]:
    try:
        pairs = list(items.items())
    except Exception:
        return {"repr": _repr(items)}
    return {
        str(k): "<redacted>" if SECRET_KEY.search(str(k)) and v else plain(v, depth + 1) for k, v in pairs
    }


def _repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _probe(argv: list[str], cwd: Path | None = None) -> str | None:
    """``argv``'s stdout, stripped; ``None`` when it is not installed, fails or times out."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state() -> dict[str, Any] | None:
    """The commit of the git checkout gf2env is imported from (an editable install) and whether its
    tracked files differ from it; ``None`` for an installed wheel. The checkout is the folder holding
    the ``gf2env`` package, never a repository around it (the user's project, a virtualenv's)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    top = _probe(["git", "rev-parse", "--show-toplevel"], root)
    commit = _probe(["git", "rev-parse", "HEAD"], root)
    if top is None or commit is None or Path(top).resolve() != root:
        return None
    status = _probe(["git", "status", "--porcelain", "--untracked-files=no"], root)
    return {"commit": commit, "dirty": None if status is None else bool(status), "root": str(root)}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """The installed versions of ``names`` (absent ones left out), read without importing them."""
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def gpus() -> list[dict[str, Any]]:
    """The GPUs' names and memory: from ``torch.cuda`` when torch is imported and CUDA initialized
    (asking it otherwise would initialize CUDA, which a later fork cannot inherit), else from
    ``nvidia-smi``; empty when neither answers."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return [
                {"name": cuda.get_device_name(i), "memory_bytes": cuda.get_device_properties(i).total_memory}
                for i in range(cuda.device_count())
            ]
    except Exception:
        pass
    listed = _probe(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
    found = []
    for line in (listed or "").splitlines():
        name, _, memory = line.rpartition(",")
        mib = memory.strip().removesuffix("MiB").strip()
        if name.strip():
            found.append({"name": name.strip(), "memory_bytes": int(mib) * 2**20 if mib.isdigit() else None})
    return found


def host() -> dict[str, Any]:
    """The machine: hostname, platform, CPU model and count, total memory, GPUs."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "cpus_usable": usable,
        "memory_bytes": _memory_bytes(),
        "gpus": gpus(),
    }


def _history(path: Path) -> list[dict[str, Any]]:
    """The records in ``path``, oldest first (its ``previous``, then its own); a file that is no record
    is moved aside to ``run.json.unreadable-STAMP`` and counts as none."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError):
        text = ""
    try:
        latest = json.loads(text)
    except ValueError:
        latest = None
    if not isinstance(latest, dict):
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        os.replace(path, path.with_name(f"{path.name}.unreadable-{stamp}"))
        return []
    previous = latest.pop("previous", [])
    return [r for r in previous if isinstance(r, dict)] + [latest] if isinstance(previous, list) else [latest]


def _save(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` to ``path`` atomically, the other records found there kept under ``previous``."""
    others = [r for r in _history(path) if r.get("id") != record["id"]]
    text = json.dumps({**record, "previous": others}, indent=2, allow_nan=False) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{record['id']}.tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def run_record(
    out_dir: str | Path, command: str, config: object, seeds: dict[str, int] | None = None
) -> Iterator[dict[str, Any]]:
    """Record the run of ``command`` with ``config`` in ``out_dir/run.json`` (the folder is created).

    Yields the record (a dict); keys the body adds to it are written at the end. On exit the record
    gets ``ended``, ``seconds`` and ``status`` ``ok``, or ``failed`` with the exception's ``type`` and
    ``message`` under ``error``; the exception propagates. A refusal (:data:`REFUSALS`) before the body
    wrote anything, in a folder with no earlier record, leaves nothing. See the module docs for the rest.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise GF2ConfigError(
            f"{out} exists and is not a folder, so it cannot hold {RECORD_FILE}; name a folder."
        )
    made = next((p for p in reversed((out, *out.parents)) if not p.exists()), None)  # the top one made
    out.mkdir(parents=True, exist_ok=True)
    path = out / RECORD_FILE
    before = set(os.listdir(out))  # what the folder held: a refused body leaves it so
    record: dict[str, Any] = {
        "id": uuid.uuid4().hex[:12],
        "command": command,
        "status": "running",
        "started": _now(),
        "ended": None,
        "seconds": None,
        "error": None,
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "config": plain(config),
        "seeds": plain(dict(seeds or {})),
        "version": __version__,
        "git": git_state(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "packages": package_versions(),
        "host": host(),
    }  # fmt: skip
    alone = not _history(path)  # no earlier record in the folder
    _save(path, record)
    start = time.monotonic()
    try:
        yield record
    except BaseException as err:
        if (
            isinstance(err, REFUSALS)
            and alone
            and set(os.listdir(out)) - {RECORD_FILE} == before - {RECORD_FILE}
        ):
            _discard(path, made)  # refused before anything was written: nothing is left
            raise
        clean_exit = isinstance(err, SystemExit) and err.code in (0, None)
        record.update(
            status="ok" if clean_exit else "failed",
            error=None if clean_exit else {"type": type(err).__name__, "message": str(err)},
        )
        _finish(path, record, start, quiet=True)
        raise
    record["status"] = "ok"
    _finish(path, record, start, quiet=False)


def _discard(path: Path, made: Path | None) -> None:
    """Remove the record at ``path``, and its folder up to ``made``, the top folder the record made."""
    path.unlink(missing_ok=True)
    for folder in (path.parent, *path.parent.parents) if made is not None else ():
        with contextlib.suppress(OSError):
            folder.rmdir()
        if folder == made:
            break


def _finish(path: Path, record: dict[str, Any], start: float, quiet: bool) -> None:
    """Write the record's end; ``quiet``: a failure to write it does not hide the body's own error."""
    record.update(ended=_now(), seconds=round(time.monotonic() - start, 3))
    record.update(plain({k: v for k, v in record.items() if k != "previous"}))
    try:
        _save(path, record)
    except OSError:
        if not quiet:
            raise


__all__ = ["PACKAGES", "RECORD_FILE", "git_state", "gpus", "host", "package_versions", "plain", "run_record"]
