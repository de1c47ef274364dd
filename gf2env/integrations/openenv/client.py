"""The OpenEnv clients: one WebSocket session (one env) on a gf2env OpenEnv server.

``GF2ReconClient`` talks to a ``GF2Recon-v*`` server and ``GF2ReconTextClient`` to a ``GF2ReconText-v*``
one. Both are OpenEnv ``EnvClient``s, async by default; ``.sync()`` gives the blocking form::

    with GF2ReconTextClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=0)            # StepResult: observation, reward (None), done
        result = env.step(GF2ReconTextAction(response="\\\\boxed{[13, 15, 17]}"))

``reset`` takes ``seed``, ``episode_id`` and ``start_depth``; ``step`` takes the action model, or a plain
dict that the server validates. An error frame from the server becomes the exception the env raises
in-process: :class:`~gf2env.errors.InvalidActionError` for a bad action (wrong type or shape, an unknown
field, an index out of range), :class:`~gf2env.errors.GF2ConfigError` for bad reset fields, and
:class:`~gf2env.errors.EnvServerError` (with the server's ``code``) for anything else, such as a step
after the episode ended or a full server (``CAPACITY_REACHED``). The session stays usable after each.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from pydantic import BaseModel, ValidationError
from websockets.exceptions import ConnectionClosed

from gf2env.errors import EnvServerError, GF2ConfigError, InvalidActionError
from gf2env.integrations.openenv.models import (
    GF2ReconAction,
    GF2ReconObservation,
    GF2ReconState,
    GF2ReconTextAction,
    GF2ReconTextObservation,
)

ActT = TypeVar("ActT", bound=BaseModel)
ObsT = TypeVar("ObsT", bound=BaseModel)

# The env exceptions that come back as themselves (the server reports "<ExceptionName>: <message>").
TYPED_ERRORS: dict[str, type[Exception]] = {
    "InvalidActionError": InvalidActionError,
    "GF2ConfigError": GF2ConfigError,
}
# OpenEnv's error codes after which the server closes the WebSocket (no session was made, or it broke).
SESSION_ENDING = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})


def _validation_text(errors: Any) -> str:
    """Pydantic's error list (as the server sends it) in one line per field."""
    if not isinstance(errors, list):
        return str(errors)
    lines = []
    for e in errors:
        loc = ".".join(str(part) for part in e.get("loc", ())) or "(the action)"
        got = f" (got {e['input']!r})" if "input" in e else ""
        lines.append(f"{loc}: {e.get('msg', e)}{got}")
    return "; ".join(lines)


def server_error(request: str, data: dict[str, Any]) -> Exception:
    """The typed exception for an OpenEnv error frame ``data`` answering a ``request`` message."""
    code = str(data.get("code", ""))
    message = str(data.get("message", "unknown error"))
    if code == "VALIDATION_ERROR":
        detail = _validation_text(data.get("errors"))
        if request == "step":
            return InvalidActionError(f"The server rejected the action: {detail}.")
        return EnvServerError(f"The server rejected the {request} message: {detail}.", code)
    name, sep, text = message.partition(": ")
    if code == "EXECUTION_ERROR" and sep and name in TYPED_ERRORS:
        return TYPED_ERRORS[name](text)
    return EnvServerError(f"The server answered the {request} message with {code}: {message}", code)


class _GF2Client(EnvClient, Generic[ActT, ObsT]):
    """What both clients share: payloads, parsing, typed errors."""

    action_cls: ClassVar[type[BaseModel]]
    observation_cls: ClassVar[type[BaseModel]]

    def _step_payload(self, action: ActT | dict[str, Any]) -> dict[str, Any]:
        if isinstance(action, self.action_cls):
            return action.model_dump(exclude_defaults=True)
        if isinstance(action, dict):
            return action  # the server validates it (the one check of an action)
        raise InvalidActionError(
            f"{type(self).__name__}.step takes a {self.action_cls.__name__} (or its fields as a dict), "
            f"not {type(action).__name__}."
        )

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        fields = {**payload.get("observation", {}), "done": payload.get("done", False)}
        fields["reward"] = payload.get("reward")
        try:
            observation = self.observation_cls.model_validate(fields)
        except ValidationError as err:
            raise EnvServerError(
                f"The server's observation is not a {self.observation_cls.__name__} ({err.error_count()} "
                f"errors); is this the right client for the server's env id? {_validation_text(err.errors())}"
            ) from None
        return StepResult(
            observation=observation, reward=payload.get("reward"), done=payload.get("done", False)
        )

    def _parse_state(self, payload: dict[str, Any]) -> GF2ReconState:
        return GF2ReconState.model_validate(payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        # EnvClient's own version raises a bare RuntimeError for an error frame; ours raises typed ones.
        try:
            try:
                await self._send(message)
            except ConnectionClosed:
                pass  # a server that refuses the session answers and closes at once: read that answer
            response: dict[str, Any] = await self._receive()
        except ConnectionClosed as err:
            self._ws = None  # the next call connects again, to a new session
            raise EnvServerError(
                f"The server closed the session ({err}); the next call opens a new one.", "CLOSED"
            ) from None
        if response.get("type") == "error":
            data = response.get("data") or {}
            if data.get("code") in SESSION_ENDING:
                await self.disconnect()  # the server has closed this session; the next call opens a new one
            raise server_error(str(message.get("type")), data)
        return response


class GF2ReconClient(_GF2Client[GF2ReconAction, GF2ReconObservation]):
    """A session on a ``GF2Recon-v*`` server: ``step(GF2ReconAction(action=rank or [indices]))``."""

    action_cls = GF2ReconAction
    observation_cls = GF2ReconObservation


class GF2ReconTextClient(_GF2Client[GF2ReconTextAction, GF2ReconTextObservation]):
    """A session on a ``GF2ReconText-v*`` server: ``step(GF2ReconTextAction(response=text))``."""

    action_cls = GF2ReconTextAction
    observation_cls = GF2ReconTextObservation


__all__ = ["GF2ReconClient", "GF2ReconTextClient", "server_error"]
