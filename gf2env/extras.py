"""Which optional extra installs a module: read from the installed package's own metadata.

``pyproject.toml`` declares the extras once; this reads them back (``importlib.metadata``), so a
command that meets a missing optional library can name the ``pip install -e '.[extra]'`` that fixes it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

DISTRIBUTION = "gf2env"
#: Distributions whose import name is not their project name with ``-`` read as ``_``.
IMPORT_NAMES = {"openenv-core": "openenv", "pyyaml": "yaml"}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;\s*extra\s*==\s*['\"]([^'\"]+)['\"]")


def import_name(project: str) -> str:
    """The top-level module a distribution installs, e.g. ``stable-baselines3`` -> ``stable_baselines3``."""
    key = project.lower()
    return IMPORT_NAMES.get(key, key.replace("-", "_").replace(".", "_"))


def extras_providing(module: str) -> list[str]:
    """The extras of gf2env (in declaration order, ``dev`` last) whose requirements install the
    top-level module of ``module``; empty when none does or gf2env's metadata is not installed."""
    top = module.split(".")[0].lower()
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found: list[str] = []
    for line in requirements:
        match = _REQUIREMENT.match(line)
        if match and import_name(match[1]) == top and match[2] not in found:
            found.append(match[2])
    return sorted(found, key=lambda extra: extra == "dev")


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (a cheap check before any work)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or an import hook that refuses it
        return False


def install_command(extra: str, torch: bool = False) -> str:
    """The command that installs ``extra`` (torch, when it is needed, first: any other torch spec
    pulls a CUDA build)."""
    return ("pip install torch==2.13.0 first, then " if torch else "") + f"pip install -e '.[{extra}]'"


def missing_module_message(module: str) -> str:
    """What to install for a missing optional ``module``: the extra(s) that bring it."""
    top = module.split(".")[0]
    extras = [e for e in extras_providing(top) if e != "dev"]
    if not extras:
        return f"this needs the Python module {top!r}, which is not installed"
    also = f" (it is also in {', '.join(extras[1:])})" if len(extras) > 1 else ""
    install = install_command(extras[0], torch=top == "torch")
    return f"this needs {top}, from the optional extra {extras[0]}: {install}{also}"


__all__ = ["extras_providing", "import_name", "install_command", "is_installed", "missing_module_message"]
