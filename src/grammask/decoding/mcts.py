"""Monte Carlo tree search over masked continuations, as TruncProof §4.2 combines it with constrained decoding.

Every step runs ``trials`` trials from the current output (the root), then commits the root's child
with the highest Q. A trial has four stages:

* **Selection**: from the root, follow the allowed token maximising the PUCT score
  ``Q + c_puct * P * sqrt(sum of the node's visit counts) / (1 + N)``, where ``P`` is the masked
  softmax of the logits at ``temperature``; the square root is taken of at least 1, so a node's first
  selection follows the prior.
* **Expansion**: the first token that leads out of the tree becomes a node (one forward pass).
* **Simulation**: greedy decoding from that node to EOS or ``max_tokens``; the value is the geometric
  mean of the model's unmasked probabilities of all output tokens (EOS included when reached).
* **Backup**: each edge on the path counts one more visit and keeps the maximum value seen as Q.

Greedy continuations are deterministic, so the nodes a simulation passes through are kept in the
tree, with the simulation's value: reaching one later costs no forward pass. The subtree of the
committed token is kept for the next step, as in AlphaZero. A step with a single allowed token is
committed without search.

``batch`` > 1 runs the trials in waves of that many (leaf-parallel MCTS): within a wave a selection
counts the wave's earlier selections as visits, so the wave spreads over different leaves, and the
wave's expansions and simulations share batched forward passes. ``batch=1`` is the sequential search.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from grammask.decoding.run import Forward, Guide, Run, Search
from grammask.decoding.strategy import Strategy
from grammask.errors import DecodingError
from grammask.models.protocol import ModelState


class _Node:
    """An output prefix: its model state, matcher, and search statistics.

    ``state`` is None until the node's forward pass has run, and stays None for an *end* node (EOS,
    or ``max_tokens`` reached), whose value is known at creation.
    """

    __slots__ = (
        "allowed",
        "children",
        "depth",
        "end",
        "guide",
        "logp",
        "lse",
        "parent",
        "prior",
        "q",
        "state",
        "token",
        "total",
        "value",
        "visits",
    )

    def __init__(self, parent: _Node | None, token: int, guide: Guide | None, depth: int, logp: float, end: bool):
        self.parent = parent
        self.token = token
        self.state: ModelState | None = None
        self.guide = guide
        self.depth = depth
        self.logp = logp
        self.end = end
        self.value: float | None = math.exp(logp / depth) if end else None
        self.children: dict[int, _Node] = {}
        self.lse: float | None = None
        self.allowed: np.ndarray | None = None
        self.prior: np.ndarray | None = None
        # Visits and Q by index into ``allowed``, kept only for visited children: a node may allow
        # most of the vocabulary, and a tree holds thousands of nodes.
        self.visits: dict[int, int] = {}
        self.q: dict[int, float] = {}
        self.total = 0


@dataclass(frozen=True)
class MCTS(Strategy):
    """PUCT tree search with greedy simulations; defaults as in TruncProof's experiments (5, 2, 20).

    Raises :class:`~grammask.errors.DecodingError` for ``trials`` or ``batch`` below 1, ``temperature <= 0``
    or ``c_puct < 0``.
    """

    c_puct: float = 5.0
    temperature: float = 2.0
    trials: int = 20
    batch: int = 1

    name = "mcts"

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise DecodingError(f"MCTS needs at least 1 trial per step, got {self.trials}")
        if self.batch < 1:
            raise DecodingError(f"MCTS batch must be at least 1, got {self.batch}")
        if not self.temperature > 0:
            raise DecodingError(f"MCTS temperature must be > 0, got {self.temperature}")
        if self.c_puct < 0:
            raise DecodingError(f"c_puct must be >= 0, got {self.c_puct}")

    def _search(
        self, run: Run, prompt_ids: Sequence[int], guide: Guide, max_tokens: int, rng: np.random.Generator
    ) -> Search:
        root = _Node(None, -1, guide, 0, 0.0, end=False)
        root.state = run.start(prompt_ids)
        tokens: list[int] = []
        while True:
            self._open(root)
            if len(root.allowed) > 1:
                for start in range(0, self.trials, self.batch):
                    yield from self._wave(run, root, min(self.batch, self.trials - start), max_tokens)
                pick = max(root.visits, key=lambda j: (root.q[j], root.visits[j], j))
            else:
                pick = 0
            token = int(root.allowed[pick])
            if root.guide.is_end(token):
                return tokens, "eos"
            tokens.append(token)
            if len(tokens) == max_tokens:
                return tokens, "max_tokens"
            child = root.children.get(token) or self._child(root, token, max_tokens)
            yield from self._forward(run, [child])
            child.parent = None  # lets the rest of the old tree go
            root = child

    def _open(self, node: _Node) -> None:
        """Compute a node's allowed tokens and prior, once."""
        if node.allowed is not None:
            return
        masked = node.guide.masked(node.state.logits)
        node.allowed = np.flatnonzero(np.isfinite(masked)).astype(np.int32)
        x = masked[node.allowed].astype(np.float64) / self.temperature
        prior = np.exp(x - x.max())
        node.prior = prior / prior.sum()

    def _wave(self, run: Run, root: _Node, size: int, max_tokens: int) -> Generator[Forward, list[ModelState], None]:
        """``size`` trials: selections (each counting its visits at once), then their expansions and
        simulations in shared forward passes, then the backups."""
        trials = [self._select_path(root, max_tokens) for _ in range(size)]
        yield from self._forward(run, [leaf for _, leaf in trials])
        yield from self._simulate(run, {id(leaf): leaf for _, leaf in trials}.values(), max_tokens)
        for path, leaf in trials:
            for node, i in path:
                node.q[i] = max(node.q.get(i, 0.0), leaf.value)

    def _select_path(self, root: _Node, max_tokens: int) -> tuple[list[tuple[_Node, int]], _Node]:
        node, path = root, []
        while True:
            self._open(node)
            coef = self.c_puct * math.sqrt(max(node.total, 1))
            scores = coef * node.prior
            for j, n in node.visits.items():
                scores[j] = node.q.get(j, 0.0) + coef * node.prior[j] / (1 + n)
            i = int(np.argmax(scores))
            path.append((node, i))
            node.visits[i] = node.visits.get(i, 0) + 1
            node.total += 1
            token = int(node.allowed[i])
            child = node.children.get(token)
            if child is None:
                return path, self._child(node, token, max_tokens)
            if child.end or child.state is None or node.visits[i] == 1 or child.value is None:
                return path, child
            node = child

    def _child(self, node: _Node, token: int, max_tokens: int) -> _Node:
        """A new child of ``node``; its forward pass is left to :meth:`_forward`."""
        if node.lse is None:
            logits = node.state.logits.astype(np.float64)
            top = logits.max()
            node.lse = float(top + np.log(np.exp(logits - top).sum()))
        logp = node.logp + float(node.state.logits[token]) - node.lse
        depth = node.depth + 1
        if node.guide.is_end(token):
            child = _Node(node, token, None, depth, logp, end=True)
        else:
            guide = node.guide.fork()
            guide.advance(token)
            child = _Node(node, token, guide, depth, logp, end=depth == max_tokens)
        node.children[token] = child
        return child

    def _forward(self, run: Run, nodes: Sequence[_Node]) -> Generator[Forward, list[ModelState], None]:
        """Run the pending forward passes of ``nodes`` in one batch."""
        todo = list({id(n): n for n in nodes if n.state is None and not n.end}.values())
        if todo:
            states = yield from run.extend([n.parent.state for n in todo], [n.token for n in todo])
            for node, state in zip(todo, states):
                node.state = state

    def _simulate(
        self, run: Run, leaves: Iterable[_Node], max_tokens: int
    ) -> Generator[Forward, list[ModelState], None]:
        """Greedy decoding from each leaf, in lockstep; every node passed records the final value."""
        walks = [[leaf] for leaf in leaves if leaf.value is None]
        while walks:
            steps = []
            for walk in walks:
                node = walk[-1]
                token = int(np.argmax(node.state.logits))
                if not node.guide.allows(token):  # the unmasked argmax, when allowed, is the masked one
                    token = int(np.argmax(node.guide.masked(node.state.logits)))
                child = node.children.get(token) or self._child(node, token, max_tokens)
                walk.append(child)
                steps.append(child)
            yield from self._forward(run, steps)
            unfinished = []
            for walk in walks:
                if walk[-1].value is None:
                    unfinished.append(walk)
                else:
                    for node in walk[:-1]:
                        node.value = walk[-1].value
            walks = unfinished
