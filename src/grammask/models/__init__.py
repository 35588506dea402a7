"""Language models, below decoding: what decoding needs from one (:mod:`~grammask.models.protocol`), the
transformers backend (:mod:`~grammask.models.hf`, ``pip install 'grammask[hf]'``), GGUF conversion
(:mod:`~grammask.models.gguf`), the embedded default model (:mod:`~grammask.models.default`), and
:func:`~grammask.models.load.load_model`, which turns what a user names into a model.

Only :mod:`~grammask.models.hf` imports torch, and only when imported itself.
"""
