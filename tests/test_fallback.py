"""Lark's backing up (``automata/fallback.py``): where a lexeme runs on past a complete match and dies, Lark's
``re``-based lexer falls back to that match and lexes the rest again; grammask's lexer of a Lark grammar does the
same, by fallback and chain states. Checked against Lark's own lexer, on small grammars and on whole sampled and
mutated documents of lark.lark and SynCode's Python grammar."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import lark
import numpy as np
import pytest
from conftest import get_vocab
from mask_check import check_cuts
from oracle import MaskOracle
from test_sampler_indentation import SYNCODE_PYTHON, _SynCodeIndenter

from grammask import Grammar, compile
from grammask.automata.fallback import MAX_DEPTH
from grammask.automata.lexer import build_lexer, with_fallbacks
from grammask.batch import fill_masks
from grammask.bitmask import allocate_bitmask
from grammask.errors import GrammaskError, TextRejectedError
from grammask.mask_tables import build_front
from grammask.sampler import SentenceSampler, mutate
from grammask.vocab import Vocabulary

LARK_GRAMMARS = Path(lark.__file__).resolve().parent / "grammars"

NUMBERS = ('start: (INT | FLOAT | DOT | NAME | PLUS)*\nINT: /[0-9]+/\nFLOAT: /[0-9]+(\\.[0-9]+|e[+-]?[0-9]+)/\n'
           'DOT: "."\nNAME: /[a-z]+/\nPLUS: "+"\n')
STRICT = NUMBERS.replace("start: (INT | FLOAT | DOT | NAME | PLUS)*", "start: (NAME INT DOT NAME | INT NAME PLUS NAME | PLUS FLOAT)+")
"""Where the parser takes a number's earlier match but not the longer lexeme it might become."""
COMMENTS = ('start: (A | NL)*\nA: "a"\nNL: /\\n[ \\t]*/\nCOMMENT: /\\s*\\/\\/[^\\n]*/\nWS: /[ \\t]+/\n'
            '%ignore WS\n%ignore COMMENT\n')


def _front_lexer(grammar: Grammar):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SynCode's grammars warn about conflicts and an unlexable terminal
        return build_front(grammar).lexer


def _lex(lexer, text: str) -> list[str] | None:
    stepped = lexer.step(0, text.encode())
    if stepped is None:
        return None
    emitted, state = stepped
    tail = lexer.finish(state)
    return None if tail is None else [lexer.terminals[t] for t in emitted + tail]


def _lark_lex(parser: lark.Lark, text: str) -> list[str] | None:
    try:
        return [t.type for t in parser.lex(text, dont_ignore=True)]
    except lark.exceptions.UnexpectedInput:
        return None


@pytest.mark.parametrize(("grammar", "text"), [
    (NUMBERS, "1.x"), (NUMBERS, "1."), (NUMBERS, "1.5"), (NUMBERS, "1e+x"), (NUMBERS, "1e"), (NUMBERS, "1e+"),
    (NUMBERS, "1e+5"), (NUMBERS, "1.e5"), (NUMBERS, "12ex+3e+4"),
    (COMMENTS, " \na"), (COMMENTS, " //c\na"), (COMMENTS, " \n \t a"), (COMMENTS, "a \n/"), (COMMENTS, "\n //x"),
])
def test_backs_up_as_lark(grammar, text):
    g = Grammar.from_lark(grammar, lexer="basic")
    got = _lex(_front_lexer(g), text)
    assert got == _lark_lex(lark.Lark(grammar, parser="lalr", lexer="basic"), text)
    if got is not None:
        assert _lex(build_lexer(g), text) in (got, None)  # the plain rule refuses where it differs


def test_grammars_without_fallbacks_keep_their_lexer():
    g = Grammar.from_lark('start: A+\nA: "a" | "b"\nWS: " "\n%ignore WS\n')
    assert _front_lexer(g).alt is None
    assert _front_lexer(g).n_states == build_lexer(g).n_states


def test_built_in_grammars_keep_the_plain_rule():
    assert _front_lexer(Grammar.builtin("c")).alt is None  # "1e" then "x" would back up to "1" under Lark's rule


def _documents(grammar: Grammar, n: int, seed: int):
    sampler = SentenceSampler(grammar, max_depth=8)
    rng = random.Random(seed)
    alphabet = "".join(sorted({ch for t in grammar.terminals if t.literal for ch in t.literal} | set(" \n\t\"'/#.e1")))
    made = 0
    while made < n:
        try:
            doc = sampler.sample(rng)
        except GrammaskError:  # a draw whose lexemes do not lex apart: draw again
            continue
        made += 1
        yield doc
        yield mutate(doc, rng, alphabet, edits=rng.randint(1, 3))


@pytest.mark.parametrize("name", ["lark", "syncode-python"])
def test_lexes_documents_as_lark(name):
    postlex = None
    if name == "lark":
        text = (LARK_GRAMMARS / "lark.lark").read_text()
    else:
        if SYNCODE_PYTHON is None or not SYNCODE_PYTHON.exists():
            pytest.skip("SynCode's grammars are not in shared/data/syncode-grammars")
        text, postlex = SYNCODE_PYTHON.read_text(), _SynCodeIndenter()
    grammar = Grammar.from_lark(text, name=name, lexer="basic", postlex=postlex)
    lexer = _front_lexer(grammar)
    assert lexer.alt is not None
    reference = lark.Lark(text, parser="lalr", lexer="basic")
    tried = differ = 0
    for doc in _documents(grammar, 150, seed=3):
        want = _lark_lex(reference, doc)
        tried += 1
        differ += _lex(lexer, doc) != want
    assert tried == 300 and differ == 0


def test_matcher_takes_tokens_that_end_inside_the_backing_up():
    # Lark lexes " \nA: b" as WS_INLINE, _NL, TOKEN, ...: the lexeme " \n" was a prefix of COMMENT (/\s*/ "//")
    text = (LARK_GRAMMARS / "lark.lark").read_text()
    grammar = Grammar.from_lark(text, lexer="basic")
    pieces = [b" ", b" \n", b"\n", b"A", b":", b" b", b"\nA", b"/", b"//", b"x", b"b", b" \nA", b": b", b"\n"]
    vocab = Vocabulary([*pieces, None], [len(pieces)], name="pieces")
    compiled = compile(grammar, vocab, cache=False)
    for split in ([b" ", b"\n", b"A", b":", b" b"], [b" \n", b"A", b": b"], [b" ", b"\nA", b": b"], [b" \nA", b": b"]):
        matcher = compiled.matcher()
        for piece in split:
            mask = matcher.allowed_tokens()
            assert pieces.index(piece) in mask, (split, piece)
            assert matcher.accept_token(pieces.index(piece))
        assert matcher.is_accepting()
    matcher = compiled.matcher()  # " \n//x" is one COMMENT; " \n" then "A:" backs up to WS_INLINE _NL
    assert all(matcher.accept_token(pieces.index(p)) for p in (b" \n", b"//", b"x", b"\n", b"A", b":", b" b"))
    assert matcher.is_accepting()


def test_agrees_with_lark_on_smollm2():
    text = (LARK_GRAMMARS / "lark.lark").read_text()
    grammar = Grammar.from_lark(text, lexer="basic")
    vocab = get_vocab("smollm2")
    compiled = compile(grammar, vocab, cache=False)
    reference = lark.Lark(text, parser="lalr", lexer="basic")
    for doc in [" \nA: b", " \n   \u1680 \x0c\x1e  \x0bRULE: b\n", "a: b\n \n \nc: d"]:
        try:
            reference.parse(doc)
            want = True
        except lark.exceptions.LarkError:
            want = False
        matcher = compiled.matcher()
        got = all(matcher.accept_token(t) for t in vocab.encode(doc)) and matcher.is_accepting()
        assert got == want, doc


END_ONLY_DOCS = ["a: /\\/", "a: /\\/\n", "a: /a\\/\n", "a: /\\/ ", "a: /\\/\nb: c\n", "a: /\\/\nb: c", "a: /\\/\nb: /x/\n",
                 "a: /\\/ | /y/\n", 'a: /\\/ "q"\nb: /x/\n', "a: /\\/ c x/\n", "a: x /\\/ // c", "a: /\\/\\/\n", "a: /\\/ é\n",
                 "a: /\\/\nb: \"/\"\n"]
"""lark.lark's ``REGEXP`` after ``/\\/``: Lark's ``re`` finds the regex's end at the next ``/`` anywhere later, and backs up
to ``/\\/`` (the ``\\`` read as any character) only where none comes before the end of input."""


def _lark_accepts(parser: lark.Lark, doc: str) -> bool:
    try:
        parser.parse(doc)
    except lark.exceptions.LarkError:
        return False
    return True


@pytest.mark.parametrize("lexer", ["basic", "contextual"])
def test_a_match_only_the_end_of_input_falls_back_to(lexer):
    text = (LARK_GRAMMARS / "lark.lark").read_text()
    vocab = get_vocab("smollm2")
    compiled = compile(Grammar.from_lark(text, lexer=lexer), vocab, cache=False)
    assert compiled._engine.lexer.late is not None
    reference = lark.Lark(text, parser="lalr", lexer=lexer)
    verdicts = {}
    for doc in END_ONLY_DOCS:
        matcher = compiled.matcher()
        by_tokens = all(matcher.accept_token(t) for t in vocab.encode(doc)) and matcher.is_accepting()
        try:
            by_text = compiled.matcher(prefix=doc).is_accepting()
        except TextRejectedError:
            by_text = False
        assert by_tokens == by_text == _lark_accepts(reference, doc), doc
        verdicts[doc] = by_tokens
    assert verdicts["a: /\\/\nb: c\n"] and verdicts["a: /\\/ "] and not verdicts['a: /\\/\nb: "/"\n']
    rng = random.Random(1)  # and random texts after "/\\/", about 40% of them accepted
    pieces = ["a: ", "/", "\\", "\\/", "x", " ", "\n", "b: c\n", "|", '"q"', "i", "//", "é", "/\\/", "c"]
    for _ in range(1000):
        doc = "a: /\\/" + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        matcher = compiled.matcher()
        by_tokens = all(matcher.accept_token(t) for t in vocab.encode(doc)) and matcher.is_accepting()
        assert by_tokens == _lark_accepts(reference, doc), doc


def test_the_end_only_reading_in_every_path():
    text = (LARK_GRAMMARS / "lark.lark").read_text()
    vocab = get_vocab("smollm2")
    compiled = compile(Grammar.from_lark(text, lexer="basic"), vocab, cache=False)
    doc = "a: /\\/\nb: c\n x"
    ids = vocab.encode(doc)
    matcher = compiled.matcher()
    batched, own = allocate_bitmask(1, vocab.n_logits), allocate_bitmask(1, vocab.n_logits)
    ends = []
    for k, t in enumerate(ids):
        fresh = compiled.matcher(prefix=vocab.decode(ids[:k]))
        fill_masks([matcher], batched)
        fresh.fill_mask(own[0])
        assert np.array_equal(batched, own), vocab.decode(ids[:k])
        ends.append(matcher.is_accepting())
        matcher.advance(t)
    assert ends.count(True) >= 2  # after "a: /\/" and after "...b: c\n"
    for k in range(len(ids), 0, -1):
        matcher.rollback(1)
        assert matcher.fork().is_accepting() == ends[k - 1]


def _pieces(text: bytes, pieces: list[bytes], rng: random.Random) -> list[int]:
    """``text`` as random pieces of the vocabulary (every byte of it is one)."""
    ids, i = [], 0
    while i < len(text):
        fits = [k for k, p in enumerate(pieces) if text.startswith(p, i)]
        k = rng.choice(fits)
        ids.append(k)
        i += len(pieces[k])
    return ids


@pytest.mark.parametrize(("grammar", "pieces", "texts"), [
    (NUMBERS, "0 1 2 3 4 5 . e + x 1. e+ 1e .5 +x x1 1e+ 5e", ["1.x", "1e+x", "12ex+3e+4", "1.5+x", "1e5.e", "x1.1e+"]),
    (STRICT, "0 1 2 3 4 5 . e + x y 1. e+ 1e .5 +x x1 1e+ y1 e+x", ["x1.y", "1e+x", "1ex+y", "x1.y1e+x", "+1.5x1.y", "+1e5"]),
    (COMMENTS, "a c / \n \t \\s \\s\n // \\s/ \na a\\s \n/", [" \na", " //c\na", "a \n \t a", "a\n //c/\n a"]),
])
def test_masks_equal_the_oracle_at_every_prefix(grammar, pieces, texts):
    parts = [p.replace("\\s", " ").encode() for p in pieces.split(" ")]
    vocab = Vocabulary([*parts, None], [len(parts)], name="pieces")
    g = Grammar.from_lark(grammar, lexer="basic")
    compiled = compile(g, vocab, cache=False)
    assert compiled._engine.lexer.alt is not None
    oracle = MaskOracle(grammar, build_lexer(g), vocab, backtrack=True)
    rng = random.Random(5)
    for text in texts:
        for _ in range(3):
            ids = _pieces(text.encode(), parts, rng)
            assert check_cuts(compiled, oracle, vocab, ids, list(range(len(ids) + 1))) == len(ids) + 1


def test_masks_equal_the_oracle_where_only_the_end_falls_back():
    text = (LARK_GRAMMARS / "lark.lark").read_text()
    grammar = Grammar.from_lark(text, lexer="basic")
    vocab = get_vocab("smollm2")
    compiled = compile(grammar, vocab, cache=False)
    oracle = MaskOracle(text, build_lexer(grammar), vocab, backtrack=True)
    for doc in ("a: /\\/\nb: c\n", "a: /\\/ | /y/\n"):
        ids = vocab.encode(doc)
        assert check_cuts(compiled, oracle, vocab, ids, list(range(len(ids) + 1))) == len(ids) + 1


ZEROS = 'start: item*\nitem: INT NAME | FLOAT | NAME\nINT: /0|[1-9][0-9]*/\nFLOAT: /[0-9]+\\.[0-9]+/\nNAME: /[a-z]+/\n'
ZEROS_TEXT = "0" * (MAX_DEPTH + 2) + "x"
"""FLOAT's prefix of zeros dies at ``x``, so Lark lexes INT ``0`` ``MAX_DEPTH + 1`` times, one more than the
fallback states keep; the parser never takes INT right after INT."""


def test_fallbacks_whose_readings_never_parse_are_not_built():
    """FLOAT's prefixes fall back to INT only where zeros are re-read as INT INT … or INT FLOAT, which the parser never
    takes: no fallback is built; masks stay those of Lark's lexer and parser."""
    g = Grammar.from_lark(ZEROS, lexer="basic")
    assert with_fallbacks(build_lexer(g))[0].alt is not None
    assert build_front(g).lexer.alt is None
    parts = [b"0", b"00", b"1", b".", b"5", b"x", b"0x", b"0.", b"x0"]
    vocab = Vocabulary([*parts, None], [len(parts)], name="pieces")
    compiled = compile(g, vocab, cache=False)
    oracle = MaskOracle(ZEROS, build_lexer(g), vocab, backtrack=True)
    rng = random.Random(7)
    for text in ("000.5x", "0x00.5", "10.5x0x", "00.5x0x", "x0x00.50x"):
        for _ in range(3):
            ids = _pieces(text.encode(), parts, rng)
            assert check_cuts(compiled, oracle, vocab, ids, list(range(len(ids) + 1))) == len(ids) + 1


def _backing_up_warnings(grammar: Grammar) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_front(grammar)
    return [str(w.message) for w in caught if "back up" in str(w.message)]


@pytest.mark.parametrize("lexer", ["basic", "contextual"])
def test_dropped_fallbacks_the_parser_rejects_are_not_warned_about(lexer):
    assert _backing_up_warnings(Grammar.from_lark(ZEROS, lexer=lexer)) == []
    with pytest.raises(lark.exceptions.UnexpectedInput):  # what grammask's plain rule refuses, Lark's parser refuses
        lark.Lark(ZEROS, parser="lalr", lexer=lexer).parse(ZEROS_TEXT)
    adjacent = ZEROS.replace("item: INT NAME", "item: INT")  # INT INT parses: the dropped reading matters
    assert lark.Lark(adjacent, parser="lalr", lexer=lexer).parse(ZEROS_TEXT)
    assert any(f"of INT after more than {MAX_DEPTH} lexemes" in w for w in _backing_up_warnings(Grammar.from_lark(adjacent, lexer=lexer)))


@pytest.mark.parametrize("lexer", ["basic", "contextual"])
@pytest.mark.parametrize("name", ["go", "sql"])
def test_syncode_grammars_back_up_as_lark_everywhere(name, lexer):
    """SynCode's Go drops fallbacks inside ``1e…`` and ``0000…`` numbers (NAME or DECIMAL_LIT right after
    DECIMAL_LIT), which its parser never takes; SynCode's SQL (``left outer …`` read back as ``CNAME`` ``WS``
    ``CNAME`` ``WS`` …) needs more than 3 lexemes emitted late, within ``MAX_DEPTH``: nothing to warn about."""
    path = SYNCODE_PYTHON.parent / f"{name}.lark" if SYNCODE_PYTHON is not None else None
    if path is None or not path.exists():
        pytest.skip("SynCode's grammars are not in shared/data/syncode-grammars")
    assert _backing_up_warnings(Grammar.from_lark(path.read_text(), name=name, lexer=lexer)) == []
