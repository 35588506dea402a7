"""The canonical successor relation of a real tokenizer: which next tokens keep a sequence the tokenizer's own encoding.

``build_relation(vocab)`` reads the tokenizer behind a :class:`~grammask.vocab.Vocabulary` and returns a
:class:`CanonicalRelation` (``start_state``, ``step``, ``can_end``, ``allowed``). Modules: ``model.py``
(BPE over token ids), ``pairs.py`` (which adjacent whole tokens BPE keeps apart), ``pretokens.py``
(added tokens, normalizer and pre-tokenizer cuts), ``relation.py`` (states and steps), ``build.py``
(building and caching).
"""

from grammask.canonical.build import build_relation
from grammask.canonical.relation import NOT_CANONICAL, CanonicalRelation

__all__ = ["NOT_CANONICAL", "CanonicalRelation", "build_relation"]
