"""``grammask.generate``: text in, constrained text out, on the default model or any
:class:`~grammask.models.protocol.TextModel`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grammask.compiled import CompiledGrammar
from grammask.compiler import compile
from grammask.decoding.beam import BeamSearch
from grammask.decoding.greedy import Greedy
from grammask.decoding.mcts import MCTS
from grammask.decoding.sample import Sample
from grammask.decoding.stats import GenerationStats
from grammask.decoding.stops import StopMatcher, StopRule
from grammask.decoding.strategy import Strategy
from grammask.errors import ConfigurationError, DecodingError, GrammarError
from grammask.grammar.ir import Grammar
from grammask.models.load import ModelLike, load_model
from grammask.models.protocol import TextModel

STRATEGIES: dict[str, type[Strategy]] = {"greedy": Greedy, "sample": Sample, "beam": BeamSearch, "mcts": MCTS}
"""Strategy classes by the names ``generate`` and the command line accept."""


@dataclass(frozen=True)
class Generation:
    """A generated output: its text, its token ids (EOS not included) and what it cost."""

    text: str
    tokens: list[int]
    stats: GenerationStats


def strategy_from_name(name: str, **params: object) -> Strategy:
    """A strategy by name (greedy, sample, beam, mcts) with its parameters.

    Raises :class:`~grammask.errors.DecodingError` for an unknown name, a parameter the strategy does not
    take, or a value out of range.
    """
    cls = STRATEGIES.get(name)
    if cls is None:
        raise DecodingError(f"unknown decoding strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    try:
        return cls(**params)
    except TypeError as e:
        raise DecodingError(f"bad parameter for the {name} strategy: {e}") from None


def compile_for(grammar: Grammar | CompiledGrammar | None, model: TextModel) -> CompiledGrammar | None:
    """The grammar compiled for ``model``'s vocabulary (compiling it if needed).

    Raises :class:`~grammask.errors.GrammarError` for a grammar compiled for another vocabulary or an object
    that is not a grammar, and what :meth:`~grammask.compiler.Compiler.compile` raises.
    """
    if grammar is None:
        return None
    if isinstance(grammar, CompiledGrammar):
        if grammar.vocab.fingerprint() != model.vocab.fingerprint():
            raise GrammarError(
                f"grammar {grammar.grammar.name!r} was compiled for vocabulary {grammar.vocab.name!r}, "
                f"not for this model's {model.vocab.name!r}; compile it with model.vocab"
            )
        return grammar
    if isinstance(grammar, Grammar):
        return compile(grammar, model.vocab)
    raise GrammarError(f"cannot use a {type(grammar).__name__} as a grammar: pass a Grammar, a CompiledGrammar or None")


def check_fits(model: TextModel, prompt_tokens: int, max_tokens: int) -> None:
    """Raise :class:`DecodingError` when the prompt and the output cannot fit the model's context window."""
    if max_tokens < 1:
        raise DecodingError(f"max_tokens must be at least 1, got {max_tokens}")
    window = model.context_window
    if window is None:
        return
    if prompt_tokens >= window:
        raise DecodingError(
            f"the prompt takes {prompt_tokens} tokens, more than the model's context window of {window} tokens"
        )
    if prompt_tokens + max_tokens > window:
        raise DecodingError(
            f"the prompt ({prompt_tokens} tokens) plus max_tokens={max_tokens} exceed the model's context window "
            f"of {window} tokens; lower max_tokens to at most {window - prompt_tokens}"
        )


def generate(
    model: ModelLike,
    prompt: str,
    grammar: Grammar | CompiledGrammar | None = None,
    *,
    max_tokens: int = 256,
    strategy: str | Strategy = "greedy",
    seed: int | None = None,
    chat: bool | None = None,
    stop: Sequence[str] = (),
    canonical: bool = False,
    jump_forward: bool = False,
) -> Generation:
    """Generate a reply to ``prompt`` that follows ``grammar`` (unconstrained when None).

    ``model``: see :func:`~grammask.models.load.load_model`. ``strategy``: a name from :data:`STRATEGIES`
    (default parameters) or a configured strategy such as ``Sample(temperature=0.7)``. ``chat``: apply the
    model's chat template (None: when it has one). ``stop``: strings that end the output where the text
    before them is a whole sentence of the grammar (anywhere, unconstrained); the returned text stops
    before the stop string, ``tokens`` still hold the token that completed it, and
    ``stats.stop_reason`` is ``"stop"``. ``canonical``: allow only token sequences the model's tokenizer
    would write for their text (``compiled.matcher(canonical=True)``; the budget of ``max_tokens`` then
    counts canonical tokens, see :mod:`grammask.canonical_budget`). ``jump_forward``: after each token, append the tokens of the text the grammar
    forces next (a schema's keys and punctuation) without a model choice, read in one forward pass; counted
    in ``stats.forced_tokens`` (greedy and sampling only; not with ``stop`` strings or ``canonical``, where
    it has no effect).

    Raises :class:`~grammask.errors.ModelError` (or :class:`~grammask.errors.FetchError` for the default
    model) when the model cannot be loaded; :class:`~grammask.errors.DecodingError` for an unknown strategy,
    ``max_tokens`` below 1, an empty stop string, a chat template the model lacks, or a prompt that is empty or does not fit the
    model's context window; the :class:`~grammask.errors.GrammarError` subclasses of a grammar that cannot
    be compiled (or was compiled for another vocabulary); :class:`~grammask.errors.BudgetError` when no
    output of the grammar fits in ``max_tokens`` (with ``canonical``: none is found); :class:`~grammask.errors.CanonicalError` for ``canonical``
    with a tokenizer that has no canonical relation, and :class:`~grammask.errors.ConfigurationError` for
    ``canonical`` without a grammar; :class:`~grammask.errors.DecodingError` also for ``jump_forward`` with
    beam search or MCTS.
    """
    text_model = load_model(model)
    if isinstance(strategy, str):
        strategy = strategy_from_name(strategy)
    compiled = compile_for(grammar, text_model)
    prompt_ids = text_model.encode_prompt(prompt, chat=chat)
    check_fits(text_model, len(prompt_ids), max_tokens)
    if canonical and compiled is None:
        raise ConfigurationError("canonical=True needs a grammar: unconstrained decoding is already the model's own")
    if compiled is None:
        matcher = None
    else:
        matcher = compiled.limited_matcher(max_tokens, canonical=canonical)
    rule = StopRule(stop, compiled) if stop else None
    if rule is not None:
        matcher = StopMatcher(matcher, rule, text_model.vocab)
    decoded = strategy.decode(text_model, prompt_ids, matcher, max_tokens=max_tokens, seed=seed,
                              jump_forward=jump_forward)
    if rule is not None:
        data = text_model.vocab.decode(decoded.tokens)
        cut = rule.cut(data)
        if cut is not None:
            decoded.stats.stop_reason = "stop"
            return Generation(data[:cut].decode("utf-8", errors="replace"), decoded.tokens, decoded.stats)
    return Generation(text_model.decode(decoded.tokens), decoded.tokens, decoded.stats)
