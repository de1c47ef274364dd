"""verifiers' plugin id ``gf2-recon``: verifiers 0.4 imports a taskset (and its default harness) by the
name of a top-level module, so this package re-exports them from :mod:`gf2env.agents.integrations.verifiers`.

    vf-eval gf2-recon -m MODEL --client.base-url http://127.0.0.1:8000/v1 --env.agent.runtime.type subprocess
"""

from gf2env.agents.integrations.verifiers import GF2Harness, GF2Taskset

__all__ = ["GF2Harness", "GF2Taskset"]
