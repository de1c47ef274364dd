"""gf2env on OpenEnv: a server for the registered envs and its typed clients (the ``openenv`` extra).

Serve one env id per process::

    python -m gf2env.integrations.openenv --env GF2ReconText-v1 --port 8000 p=8 d=3 n=6 K=16

and play it with :class:`GF2ReconTextClient` (or :class:`GF2ReconClient` for ``GF2Recon-v*``). The wire
types are in :mod:`~gf2env.integrations.openenv.models`, the server in
:mod:`~gf2env.integrations.openenv.server`, the clients in :mod:`~gf2env.integrations.openenv.client`.
"""

from gf2env.errors import MissingExtraError

try:
    import openenv.core  # noqa: F401
except ImportError as err:
    raise MissingExtraError(
        f"gf2env.integrations.openenv needs OpenEnv: pip install -e '.[openenv]' ({err})."
    ) from err

from gf2env.integrations.openenv.client import GF2ReconClient, GF2ReconTextClient  # noqa: E402
from gf2env.integrations.openenv.models import (  # noqa: E402
    GF2ReconAction,
    GF2ReconObservation,
    GF2ReconState,
    GF2ReconTextAction,
    GF2ReconTextObservation,
)

__all__ = [
    "GF2ReconAction",
    "GF2ReconClient",
    "GF2ReconObservation",
    "GF2ReconState",
    "GF2ReconTextAction",
    "GF2ReconTextClient",
    "GF2ReconTextObservation",
]
