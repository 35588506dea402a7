"""Constraining other libraries' generation loops with a compiled grammar. Each adapter lives in its own module
and imports its framework only when imported itself:

* :mod:`grammask.adapters.hf`: a logits processor for transformers' ``model.generate``
  (``pip install 'grammask[hf]'``; the transformers model itself is :mod:`grammask.models.hf`);
* :mod:`grammask.adapters.llama_cpp`: llama.cpp through ``llama-cpp-python``, as a grammask model and a logits
  processor for ``Llama.__call__`` (``pip install 'grammask[llama-cpp]'``).
"""
