"""Constraining other libraries' generation loops with a compiled grammar. Each adapter lives in its own module
and imports its framework only when imported itself:

* :mod:`grammask.adapters.hf`: a logits processor for transformers' ``model.generate``
  (``pip install 'grammask[hf]'``; the transformers model itself is :mod:`grammask.models.hf`);
* :mod:`grammask.adapters.llama_cpp`: llama.cpp through ``llama-cpp-python``, as a grammask model and a logits
  processor for ``Llama.__call__`` (``pip install 'grammask[llama-cpp]'``);
* :mod:`grammask.adapters.sglang`: the SGLang grammar backend ``grammask`` (a ``sglang.srt.plugins`` entry point);
* :mod:`grammask.adapters.vllm`: a vLLM v1 ``StructuredOutputBackend``/``StructuredOutputGrammar`` pair, and
  :mod:`grammask.adapters.vllm_logits`: a vLLM v1 custom logits processor (vLLM's official extension point).

The engine-neutral parts of the SGLang and vLLM adapters need neither engine nor torch:
:mod:`~grammask.adapters.requests` (request kinds to grammars), :mod:`~grammask.adapters.request_state`
(one request's state), :mod:`~grammask.adapters.engine_vocab` (the vocabulary from the engine's tokenizer);
:mod:`~grammask.adapters.torch_bitmask` applies bitmasks to torch logits.
"""
