"""Counts and timings of one generation."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class GenerationStats:
    """What one generation cost, split into model time and the time grammask adds.

    A *step* is one committed output token, EOS included: the unit the per-token figures use.
    For beam search and MCTS a step covers every forward pass and mask the search made for it.
    """

    prompt_tokens: int = 0
    tokens: int = 0
    """Output tokens (EOS not counted)."""
    steps: int = 0
    seconds: float = 0.0
    """Wall time of decoding, reading the prompt included."""
    prefill_seconds: float = 0.0
    """Time to read the prompt."""
    model_seconds: float = 0.0
    """Time in forward passes after the prompt."""
    mask_seconds: float = 0.0
    """Time grammask adds: computing masks, applying them to logits, advancing matchers."""
    compile_seconds: float = 0.0
    """Getting grammask's numba kernels ready on their first use in this process (compiling them after an
    install, loading them from numba's disk cache later): counted in ``seconds``, kept out of the mask
    time and the per-token figures (a one-off, not a cost of decoding)."""
    forward_passes: int = 0
    """Sequences extended by one token (a batch of 4 counts 4), or by a run of forced tokens read at once."""
    forced_tokens: int = 0
    """Output tokens appended by jump-forward: text the grammar forces, read without a model choice."""
    stop_reason: str = ""
    """``"eos"`` (the model ended, or the grammar allowed nothing else), ``"stop"`` (a stop sequence) or
    ``"max_tokens"``."""

    @property
    def decode_seconds(self) -> float:
        """Wall time after the prompt was read, first-use kernel compilation left out."""
        return self.seconds - self.prefill_seconds - self.compile_seconds

    @property
    def ms_per_token(self) -> float:
        return 1e3 * self.decode_seconds / self.steps if self.steps else 0.0

    @property
    def mask_ms_per_token(self) -> float:
        return 1e3 * self.mask_seconds / self.steps if self.steps else 0.0

    @property
    def mask_share(self) -> float:
        """Mask time as a share of the decoding time."""
        return self.mask_seconds / self.decode_seconds if self.decode_seconds > 0 else 0.0

    def summary(self) -> str:
        """One line: tokens, time, mask time per token and its share of the step."""
        line = (
            f"{self.tokens} tokens ({self.stop_reason}), {self.seconds:.2f} s, "
            f"{self.ms_per_token:.1f} ms/token, mask {self.mask_ms_per_token:.2f} ms/token "
            f"({100 * self.mask_share:.1f}% of the step), prompt {self.prompt_tokens} tokens in "
            f"{self.prefill_seconds:.2f} s"
        )
        if self.forced_tokens:
            line += f", {self.forced_tokens} tokens forced by the grammar (jump-forward)"
        if self.compile_seconds >= 0.05:
            line += f", kernels compiled or loaded on first use in {self.compile_seconds:.1f} s (not counted per token)"
        return line

    def to_dict(self) -> dict:
        """The fields and the derived per-token figures, for JSON output."""
        out = asdict(self)
        out.update(ms_per_token=self.ms_per_token, mask_ms_per_token=self.mask_ms_per_token, mask_share=self.mask_share)
        return out
