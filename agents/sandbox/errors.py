"""The sandbox's own exception types (both are :class:`gf2env.errors.GF2ConfigError`)."""

from __future__ import annotations

from gf2env.errors import GF2ConfigError


class SandboxConfigError(GF2ConfigError):
    """Bad sandbox limits, isolation mode, code or record view."""


class SandboxUnavailableError(GF2ConfigError):
    """The requested isolation cannot run on this machine."""
