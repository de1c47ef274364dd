"""gf2env: the GF(2) circuit-reconstruction benchmark as a Gymnasium environment.

``import gf2env`` registers ``GF2Recon-v1`` and ``GF2ReconText-v1`` (prompt in, text out), and their
v0 versions, which replay the first random stream (``stream="generator"``) exactly.
"""

from gymnasium.envs.registration import register, registry

from gf2env.envs.env import GF2ReconEnv
from gf2env.envs.vector import GF2ReconVectorEnv
from gf2env.errors import GF2ConfigError, InvalidActionError, RecordFormatError
from gf2env.records.columns import RecordColumns
from gf2env.records.files import read_record_columns, read_records
from gf2env.records.parquet import write_parquet
from gf2env.records.record import Record, generate_records, write_records
from gf2env.task.combinatorics import num_supports, rank_support, unrank_support
from gf2env.task.oracle import (
    Evidence,
    Instance,
    TaskConfig,
    adversarial_weight,
    draw_evidence,
    draw_instance,
    firing_probability,
)
from gf2env.task.rules import Failure
from gf2env.text.answers import Verdict, validate_answer
from gf2env.version import __version__ as __version__

ENV_ID = "GF2Recon-v1"
TEXT_ENV_ID = "GF2ReconText-v1"
_V0 = {"stream": "generator"}  # v0 is v1's task on the first random stream

for _version, _kwargs in (("v1", {}), ("v0", _V0)):
    if f"GF2Recon-{_version}" not in registry:
        register(
            id=f"GF2Recon-{_version}",
            entry_point="gf2env.envs.env:GF2ReconEnv",
            vector_entry_point="gf2env.envs.vector:GF2ReconVectorEnv",
            kwargs=_kwargs,
        )
    if f"GF2ReconText-{_version}" not in registry:
        register(
            id=f"GF2ReconText-{_version}", entry_point="gf2env.envs.text_env:GF2ReconTextEnv", kwargs=_kwargs
        )

__all__ = [
    "ENV_ID",
    "TEXT_ENV_ID",
    "Evidence",
    "Failure",
    "GF2ConfigError",
    "GF2ReconEnv",
    "GF2ReconVectorEnv",
    "Instance",
    "InvalidActionError",
    "Record",
    "RecordColumns",
    "RecordFormatError",
    "TaskConfig",
    "Verdict",
    "adversarial_weight",
    "draw_evidence",
    "draw_instance",
    "firing_probability",
    "generate_records",
    "num_supports",
    "rank_support",
    "read_record_columns",
    "read_records",
    "unrank_support",
    "validate_answer",
    "write_parquet",
    "write_records",
]
