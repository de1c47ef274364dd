"""gf2env: the GF(2) circuit-reconstruction benchmark as a Gymnasium environment.

``import gf2env`` registers ``GF2Recon-v0`` and ``GF2ReconText-v0`` (prompt in, text out).
"""

from gymnasium.envs.registration import register, registry

from gf2env.combinatorics import num_supports, rank_support, unrank_support
from gf2env.env import GF2ReconEnv
from gf2env.errors import GF2ConfigError, InvalidActionError, RecordFormatError
from gf2env.oracle import (
    Evidence,
    Instance,
    TaskConfig,
    adversarial_weight,
    draw_evidence,
    draw_instance,
    firing_probability,
)
from gf2env.records import Record, generate_records, read_records, write_records
from gf2env.rules import Failure
from gf2env.text.answers import Verdict, validate_answer
from gf2env.vector import GF2ReconVectorEnv

__version__ = "0.1.0"

if "GF2Recon-v0" not in registry:
    register(
        id="GF2Recon-v0",
        entry_point="gf2env.env:GF2ReconEnv",
        vector_entry_point="gf2env.vector:GF2ReconVectorEnv",
    )
if "GF2ReconText-v0" not in registry:
    register(id="GF2ReconText-v0", entry_point="gf2env.text.text_env:GF2ReconTextEnv")

__all__ = [
    "Evidence",
    "Failure",
    "GF2ConfigError",
    "GF2ReconEnv",
    "GF2ReconVectorEnv",
    "Instance",
    "InvalidActionError",
    "Record",
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
    "read_records",
    "unrank_support",
    "validate_answer",
    "write_records",
]
