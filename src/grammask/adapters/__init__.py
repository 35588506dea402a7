"""Model backends. Each lives in its own module and imports its framework only when imported itself:

* :mod:`grammask.adapters.hf`: Hugging Face transformers (``pip install 'grammask[hf]'``);
* :mod:`grammask.adapters.llama_cpp`: llama.cpp through ``llama-cpp-python`` (``pip install 'grammask[llama-cpp]'``).
"""
