"""Any model a user names (nothing, a local Hugging Face directory, a GGUF file, or a model object) as a
:class:`~grammask.models.protocol.TextModel`."""

from __future__ import annotations

from os import PathLike
from typing import Any

from grammask.errors import ModelError
from grammask.models.default import default_model_dir
from grammask.models.protocol import TextModel

ModelLike = TextModel | str | PathLike | None
"""What :func:`load_model` accepts."""


def load_model(model: ModelLike = None, **options: Any) -> TextModel:
    """``None``: the default model (fetched on first use); a path: a local Hugging Face model directory or a
    GGUF file; a :class:`TextModel`: itself.

    ``options`` (``dtype``, ``eos_ids``, ``recent``) go to :func:`~grammask.models.hf.load_hf_model` when a
    model is loaded. Raises :class:`~grammask.errors.ModelError` for anything else, when the 'hf' extra is
    missing or the model cannot be loaded, and :class:`~grammask.errors.FetchError` when the default model
    cannot be fetched.
    """
    if isinstance(model, TextModel):
        if options:
            raise ModelError(f"options {sorted(options)} apply when loading a model, not to a {type(model).__name__}")
        return model
    if model is not None and not isinstance(model, (str, PathLike)):
        raise ModelError(
            f"cannot use a {type(model).__name__} as a model: pass a path, a grammask.models.hf.HFModel "
            "(or another TextModel), or None for the default model"
        )
    try:
        from grammask.models.hf import load_hf_model
    except ImportError as e:
        raise ModelError(
            f"running a model needs the 'hf' extra ({e.name} is missing): pip install 'grammask[hf]'"
        ) from None
    return load_hf_model(default_model_dir() if model is None else model, **options)
