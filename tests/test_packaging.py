"""The built distribution: one import name, ``gf2env`` (and ``gf2_recon``, which verifiers' id needs).

pyproject.toml lists the packages by hand (``agents/`` and ``train/`` install as ``gf2env.agents`` and
``gf2env.train`` through ``package-dir``), so these tests check the list against the folders and build the
wheel the way ``pip install .`` does."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from tests.paths import REPO

SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """Where a package's source lives, by pyproject's package-dir (longest prefix first)."""
    mapping = SETUPTOOLS["package-dir"]
    for prefix in sorted(mapping, key=len, reverse=True):
        if package == prefix or package.startswith(prefix + "."):
            return REPO / mapping[prefix] / package[len(prefix) :].lstrip(".").replace(".", "/")
    return REPO / package.replace(".", "/")


def test_the_package_list_names_every_package_folder():
    listed = {_folder(package).resolve() for package in SETUPTOOLS["packages"]}
    assert all((folder / "__init__.py").is_file() for folder in listed), "a listed package has no __init__.py"
    on_disk = {
        path.parent.resolve()
        for root in ("gf2env", "agents", "train")
        for path in (REPO / root).rglob("__init__.py")
    }
    assert on_disk - listed == set(), "add these folders to [tool.setuptools] packages in pyproject.toml"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(out),
        str(REPO),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=out)
    assert run.returncode == 0, run.stderr[-3000:]
    (found,) = out.glob("gf2env-*.whl")
    return found


def test_the_wheel_installs_only_gf2env_and_gf2_recon(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"gf2env", "gf2_recon"}
    assert "gf2env/agents/llm/agent.py" in names and "gf2env/train/grpo.py" in names
    assert "gf2_recon/__init__.py" in names and not any("/gf2_recon/" in name for name in names)


def test_the_installed_copy_imports_from_outside_the_checkout(wheel, tmp_path):
    """Installed as ``pip install .`` installs it, the agents and training layers import as gf2env's."""
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    code = (
        "import gf2env, gf2env.agents.llm.agent, gf2env.train.grpo, gf2env.agents.sb3_agent, importlib.util\n"
        "print(gf2env.__file__, gf2env.agents.__file__, gf2env.train.__file__)\n"
        "print(importlib.util.find_spec('agents'), importlib.util.find_spec('train'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    files, specs = run.stdout.splitlines()
    assert all(path.startswith(str(target)) for path in files.split()), files
    assert specs == "None None"
