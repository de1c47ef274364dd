"""Typed exceptions raised on user-facing bad input."""

from __future__ import annotations

from gymnasium.error import ResetNeeded


class GF2ConfigError(ValueError):
    """An invalid task configuration (p, d, n, K, w, sampling mode, step mode, ...)."""


class MissingExtraError(GF2ConfigError):
    """An optional extra's library is not installed; the message names ``pip install -e '.[extra]'``."""


class InvalidActionError(ValueError):
    """An action that is not in the action space, or an index set that is not a term."""


class ResetNeededError(ResetNeeded, RuntimeError):
    """``step()`` before ``reset()`` (or after the episode ended, where nothing resets by itself).

    Gymnasium's :class:`~gymnasium.error.ResetNeeded`, so code that handles Gymnasium's own catches it."""


class RecordFormatError(ValueError):
    """A record that does not follow the paper's JSON format."""


class InconsistentEvidenceError(ValueError):
    """A step's samples contradict its prefix: no candidate next term explains them."""


class EnvServerError(RuntimeError):
    """An environment server answered with an error that is not a bad action or a bad configuration.

    ``code`` is the server's error code (OpenEnv's ``CAPACITY_REACHED``, ``EXECUTION_ERROR``, ...)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code
