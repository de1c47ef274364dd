"""The OpenEnv server: a registered gf2env Gymnasium env behind OpenEnv's app (``create_app``).

Each WebSocket session (one client) gets its own env, made with ``gym.make(env_id, **env_kwargs)``
exactly as in-process, so a seeded episode through the server is the in-process episode. Sessions
are independent (``SUPPORTS_CONCURRENT_SESSIONS``), up to ``max_sessions`` at once; a session ends,
and its env is closed, when its client disconnects, cleanly or not (a peer that vanishes without
closing its socket is dropped by uvicorn's WebSocket ping, after about 40 s by default).

An env error (a bad action, a step after the end, unknown reset fields) does not end the session: OpenEnv
answers it with an error frame whose message is ``"<ExceptionName>: <message>"`` (:class:`ServedError`),
from which the client raises the same typed exception (:mod:`gf2env.integrations.openenv.client`).
OpenEnv's stateless HTTP ``/reset`` and ``/step`` make a fresh env per request, so an episode needs the
WebSocket session (the client); ``/health``, ``/schema`` and ``/metadata`` answer over plain HTTP.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar
from uuid import uuid4

import gymnasium as gym
from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata

from gf2env.envs.env import GF2ReconEnv
from gf2env.errors import GF2ConfigError
from gf2env.integrations.openenv.models import (
    GF2ReconAction,
    GF2ReconObservation,
    GF2ReconState,
    GF2ReconTextAction,
    GF2ReconTextObservation,
    jsonable,
)
from gf2env.version import __version__

ARRAY_ENTRY_POINT = "gf2env.envs.env:GF2ReconEnv"
TEXT_ENTRY_POINT = "gf2env.envs.text_env:GF2ReconTextEnv"
DEFAULT_MAX_SESSIONS = 16


class ServedError(Exception):
    """An env's exception as the client sees it: ``"<ExceptionName>: <message>"``."""

    def __init__(self, err: BaseException) -> None:
        self.name = type(err).__name__
        super().__init__(f"{self.name}: {err}")


def served_env_ids() -> dict[str, str]:
    """The registered gf2env ids this server can serve, each with its kind (``"array"`` or ``"text"``)."""
    kinds = {ARRAY_ENTRY_POINT: "array", TEXT_ENTRY_POINT: "text"}
    return {
        env_id: kinds[str(spec.entry_point)]
        for env_id, spec in gym.registry.items()
        if str(spec.entry_point) in kinds
    }


class _GF2Environment(Environment):
    """One session's env: reset/step/state over a ``gym.make``'d gf2env env."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True  # each session owns its env; nothing is shared
    action_cls: ClassVar[type[Any]]
    observation_cls: ClassVar[type[Any]]

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
        super().__init__()
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self._env = make_env(env_id, self.env_kwargs)
        self._state = GF2ReconState(env_id=env_id, env_kwargs=jsonable(self.env_kwargs))

    # OpenEnv passes the client's reset fields as keyword arguments.
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        start_depth: int | None = None,
        **unknown: Any,
    ) -> Any:
        try:
            if unknown:
                raise GF2ConfigError(
                    f"reset fields {sorted(unknown)} are unknown; "
                    "the fields are seed, episode_id and start_depth."
                )
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
                raise GF2ConfigError(f"seed={seed!r} is not an integer >= 0; pass one, or no seed.")
            options = None if start_depth is None else {"start_depth": start_depth}
            obs, info = self._env.reset(seed=seed, options=options)
        except Exception as err:
            raise ServedError(err) from err
        self._state = GF2ReconState(
            env_id=self.env_id,
            env_kwargs=jsonable(self.env_kwargs),
            episode_id=episode_id or str(uuid4()),
            step_count=0,
            seed=seed,
            depth=int(info["depth"]),
            done=False,
        )
        return self._observation(obs, None, False, False, info)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        try:
            obs, reward, terminated, truncated, info = self._env.step(self._gym_action(action))
        except Exception as err:
            raise ServedError(err) from err
        self._state.step_count += 1
        self._state.depth = self._depth_after()
        self._state.done = bool(terminated or truncated)
        return self._observation(obs, float(reward), bool(terminated), bool(truncated), info)

    @property
    def state(self) -> GF2ReconState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        doc = (type(self._env.unwrapped).__doc__ or "").strip().splitlines()
        return EnvironmentMetadata(
            name=self.env_id,
            description=doc[0] if doc else self.env_id,
            version=__version__,
        )

    def close(self) -> None:
        self._env.close()

    def _depth_after(self) -> int:
        inner: GF2ReconEnv = self._env.unwrapped  # type: ignore[assignment]
        return inner.depth

    def _gym_action(self, action: Any) -> Any:
        raise NotImplementedError

    def _observation(
        self, obs: Any, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> Any:
        raise NotImplementedError


class GF2ReconEnvironment(_GF2Environment):
    """``GF2Recon-v*`` served: actions are ranks or index lists, observations the arrays as lists."""

    action_cls = GF2ReconAction
    observation_cls = GF2ReconObservation

    def _gym_action(self, action: GF2ReconAction) -> Any:
        return action.action

    def _observation(
        self, obs: Any, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> GF2ReconObservation:
        return GF2ReconObservation(
            prefix=obs["prefix"].tolist(),
            depth=int(obs["depth"]),
            address=obs["address"].tolist(),
            payload=obs["payload"].tolist(),
            labels=obs["labels"].tolist(),
            terminated=terminated,
            truncated=truncated,
            info=jsonable(info),
            done=terminated or truncated,
            reward=reward,
        )


class GF2ReconTextEnvironment(_GF2Environment):
    """``GF2ReconText-v*`` served: actions are the model's replies, observations the prompts."""

    action_cls = GF2ReconTextAction
    observation_cls = GF2ReconTextObservation

    def _gym_action(self, action: GF2ReconTextAction) -> Any:
        return action.response

    def _observation(
        self, obs: Any, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> GF2ReconTextObservation:
        return GF2ReconTextObservation(
            prompt=obs,
            terminated=terminated,
            truncated=truncated,
            info=jsonable(info),
            done=terminated or truncated,
            reward=reward,
        )


ENVIRONMENTS: dict[str, type[_GF2Environment]] = {
    "array": GF2ReconEnvironment,
    "text": GF2ReconTextEnvironment,
}


def environment_class(env_id: str) -> type[_GF2Environment]:
    """The server-side environment class for ``env_id`` (a registered gf2env id)."""
    ids = served_env_ids()
    if env_id not in ids:
        raise GF2ConfigError(f"env_id={env_id!r} is not a gf2env environment; pass one of {sorted(ids)}.")
    return ENVIRONMENTS[ids[env_id]]


def make_env(env_id: str, env_kwargs: Mapping[str, Any]) -> gym.Env:
    """``gym.make(env_id, **env_kwargs)``, an unknown keyword a :class:`GF2ConfigError` naming it.

    Without Gymnasium's passive env checker, which only warns, and which (Gymnasium 1.4) breaks the
    env's next step when its first reset raised (a bad ``start_depth``): a session must outlive that.
    """
    try:
        return gym.make(env_id, disable_env_checker=True, **env_kwargs)
    except TypeError as err:
        raise GF2ConfigError(f"{env_id} does not take these arguments {dict(env_kwargs)}: {err}") from None


def make_app(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
) -> FastAPI:
    """OpenEnv's FastAPI app serving ``env_id`` (its arguments checked now, by making the env once)."""
    env_kwargs = dict(env_kwargs or {})
    cls = environment_class(env_id)
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise GF2ConfigError(f"max_sessions={max_sessions!r} is not an integer >= 1.")
    cls(env_id, env_kwargs).close()
    return create_app(
        functools.partial(cls, env_id, env_kwargs),
        cls.action_cls,
        cls.observation_cls,
        env_name=env_id,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions),
    )


def serve(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    log_level: str = "warning",
) -> None:
    """Serve ``env_id`` on ``host:port`` until interrupted (uvicorn)."""
    import uvicorn

    app = make_app(env_id, env_kwargs, max_sessions=max_sessions)
    where = f"http://{host}:{port} (WebSocket /ws, GET /health)"
    print(f"serving {env_id} {dict(env_kwargs or {})} at {where}", flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "GF2ReconEnvironment",
    "GF2ReconTextEnvironment",
    "ServedError",
    "environment_class",
    "make_app",
    "make_env",
    "serve",
    "served_env_ids",
]
