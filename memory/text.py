"""Text normalisation shared by the guards, the snapshot, scoring and retrieval.

``compact`` (lowercase, URLs and custom emoji dropped, non-alphanumerics to
spaces) and ``tokens`` are the forms that grounding and lexical scoring compare. Tokenisation is
Unicode-aware: letters and digits of any script count. Scripts written without
spaces (Han, Kana, Hangul, Thai …) are split into overlapping character
bigrams, so "我住在东京" and "他住在东京" share tokens the way English words do.
"""

from __future__ import annotations

import re
import unicodedata

_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_CUSTOM_EMOJI = re.compile(r"<a?:\w{1,64}:\d{5,25}>")
_MENTION = re.compile(r"<(?:@[!&]?|#)\d{5,25}>")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Unicode's Default_Ignorable_Code_Point property: characters a renderer shows
# as nothing (zero-width and bidi controls, joiners, variation selectors, tag
# characters, Hangul fillers, Khmer inherent vowels, musical beam controls …).
# They carry no meaning for matching and are the usual way to smuggle a word
# past a filter ("ign\u061core"). Ranges copied from DerivedCoreProperties.txt
# of Unicode 14.0.0, the version of Python 3.11's ``unicodedata``
# (``unicodedata.unidata_version``); tests/extract/test_guards.py checks them against
# ``unicodedata``'s general categories. The variation selectors (U+180B–180D,
# 180F, FE00–FE0F, E0100–E01EF) are all inside these ranges.
DEFAULT_IGNORABLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG/JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ, AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE, ZWNJ, ZWJ, LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # WORD JOINER … invisible operators, bidi isolates, deprecated format
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1 … 16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE (BOM)
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # unassigned, reserved as ignorable
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT controls
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM … END PHRASE
    (0xE0000, 0xE0FFF),  # tags, VARIATION SELECTOR-17 … 256, reserved
)
_INVISIBLE = re.compile(
    "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in DEFAULT_IGNORABLE_RANGES) + "]"
)

_NO_SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3400, 0x4DBF),  # CJK ext A
    (0x4E00, 0x9FFF),  # CJK unified
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility
    (0x20000, 0x2FA1F),  # CJK ext B+
)


def _is_no_space_char(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _NO_SPACE_RANGES)


def strip_invisible(text: str) -> str:
    """``text`` without its default-ignorable code points (see above)."""
    return _INVISIBLE.sub("", text)


def is_invisible(ch: str) -> bool:
    """Is the one-character string ``ch`` a default-ignorable code point?"""
    return _INVISIBLE.fullmatch(ch) is not None


# Characters that are invisible or reorder display. ZWJ/ZWNJ (U+200C/D) and
# variation selectors are kept: they are part of emoji sequences and of
# Persian and Indic spelling. Matching (``strip_invisible``) drops them all.
_HIDDEN_FOR_DISPLAY = re.compile(
    "[\u00ad\u034f\u115f\u1160\u180e\u200b\u202a-\u202e\u2060-\u2064\u2066-\u2069"
    "\u3164\ufeff\uffa0\ufff9-\ufffb]"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """Make any str safe to store and display: no lone surrogates or controls."""
    if not isinstance(text, str):
        text = str(text)
    # Lone surrogates cannot be encoded as UTF-8 (SQLite, files); replace them.
    text = _SURROGATE.sub("\ufffd", text)
    text = _CONTROL.sub(" ", text)
    return _HIDDEN_FOR_DISPLAY.sub("", text)


# Latin look-alikes from Cyrillic and Greek. Folded only inside words that also
# contain Latin letters, so real Russian or Greek words are untouched while
# "ѕуѕtem" (Cyrillic ѕ, у) is caught.
_CONFUSABLES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
        "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d",
        "ɡ": "g", "ο": "o", "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "ѵ": "v", "ԛ": "q", "ԝ": "w",
    }
)  # fmt: skip
# Digits and symbols typed for letters ("passw0rd", "p@ss", "$ecret"). "1" is
# both "i" ("1gnore") and "l" ("ru1es"), so callers try both readings.
_LEET = {"0": "o", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
_LEET_I = str.maketrans({**_LEET, "1": "i"})
_LEET_L = str.maketrans({**_LEET, "1": "l"})
_LEET_CHARS = re.compile(r"[013457@$]")
_LOOKALIKE_TOKEN = re.compile(r"[\w@$]+")
_LATIN = re.compile(r"[a-z]")


def fold_lookalikes(text: str, *, one: str = "i") -> str:
    """Lower-cased ``text`` with look-alikes read as the Latin letter they mimic.

    Only words that contain a Latin letter are touched, so numbers ("2024",
    "$50") and other scripts stay as they are. Every character maps to one
    character: positions in the result are positions in ``text``.
    """
    leet = _LEET_L if one == "l" else _LEET_I

    def fold(m: re.Match[str]) -> str:
        word = m.group(0)
        if not word.isascii() and _LATIN.search(word):
            word = word.translate(_CONFUSABLES)
        if _LATIN.search(word) and _LEET_CHARS.search(word):
            word = word.translate(leet)
        return word

    return _LOOKALIKE_TOKEN.sub(fold, text)


# ASCII's characters that are neither letter nor digit (``_WORD`` splits on them).
_ASCII_SEPARATORS = str.maketrans({chr(i): " " for i in range(128) if not chr(i).isalnum()})


def compact(text: str) -> str:
    """Lowercase; drop URLs, custom emoji and mentions; non-alphanumerics → spaces."""
    text = text or ""
    if text.isascii():
        return _compact_ascii(text)
    value = unicodedata.normalize("NFKC", strip_invisible(text))
    value = _URL.sub(" ", value)
    value = _CUSTOM_EMOJI.sub(" ", value)
    value = _MENTION.sub(" ", value)
    value = value.casefold()
    return " ".join(_WORD.findall(value))


def _compact_ascii(text: str) -> str:
    """``compact`` of ASCII text, in a few C-speed passes: NFKC leaves ASCII
    as it is and it holds no invisible code point, each pattern is tried only
    when its mark is there, and ``_WORD``'s letters and digits are
    ``[A-Za-z0-9]`` (chat search reads hundreds of long messages per query)."""
    value = text
    if "://" in value or "www." in value.lower():
        value = _URL.sub(" ", value)
    if "<" in value:  # before lower-casing: a custom emoji is ``<a:`` or ``<:``
        value = _CUSTOM_EMOJI.sub(" ", value)
        value = _MENTION.sub(" ", value)
    return " ".join(value.lower().translate(_ASCII_SEPARATORS).split())


def _split_run(run: str) -> list[str]:
    """Split a letter/digit run into tokens, bigramming spaceless scripts."""
    out: list[str] = []
    buf: list[str] = []
    cjk: list[str] = []

    def flush_cjk() -> None:
        if not cjk:
            return
        if len(cjk) == 1:
            out.append(cjk[0])
        else:
            out.extend(cjk[i] + cjk[i + 1] for i in range(len(cjk) - 1))
        cjk.clear()

    for ch in run:
        if _is_no_space_char(ch):
            if buf:
                out.append("".join(buf))
                buf.clear()
            cjk.append(ch)
        else:
            flush_cjk()
            buf.append(ch)
    if buf:
        out.append("".join(buf))
    flush_cjk()
    return out


def tokens(text: str, *, already_compact: bool = False) -> list[str]:
    """Tokens of the compact form, in order (duplicates kept)."""
    value = text if already_compact else compact(text)
    if _NO_SPACE_RUN.search(value) is None:
        return value.split()  # no spaceless script: each run is one token
    out: list[str] = []
    for run in value.split():
        out.extend(_split_run(run))
    return out


_NO_SPACE_RUN = re.compile(
    "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _NO_SPACE_RANGES) + "]+"
)


def fts_index_text(text: str | None) -> str | None:
    """The form of ``text`` the full-text index stores: runs of a spaceless
    script become their overlapping character bigrams, each a word.

    SQLite's unicode61 tokenizer splits on spaces and punctuation only, so a
    Japanese sentence is one token and a word inside it cannot be found. As
    bigrams the index holds the same units ``tokens`` makes of a query, so
    "東京" finds "明日は東京で会議". Other text is left to the tokenizer
    (NFKC first, so full-width letters index as the ones a query types). Pure
    and deterministic: the index's triggers call it as an SQL function, on the
    new text to index it and on the old text to delete what was indexed, so a
    change to its output needs a migration that rebuilds the index.
    """
    if text is None or text.isascii():
        return text
    value = unicodedata.normalize("NFKC", text)

    def bigrams(m: re.Match[str]) -> str:
        run = m.group(0)
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "

    return _NO_SPACE_RUN.sub(bigrams, value)


def is_no_space_token(token: str) -> bool:
    return bool(token) and _is_no_space_char(token[0])


def significant_tokens(text: str, *, min_len: int = 3, limit: int | None = None) -> list[str]:
    """Tokens long enough to carry meaning (CJK bigrams always count), first ``limit``."""
    out = [t for t in tokens(text) if len(t) >= min_len or is_no_space_token(t)]
    return out if limit is None else out[:limit]


# Token counts are an estimate, not a tokenizer: a quarter of the characters
# (rounded up, the usual ratio for English under OpenAI's tokenizers) plus a
# turn's role and name framing. The chat model's own tokenizer is unknown here
# (any OpenAI-compatible endpoint), and the local MiniLM vocabulary would not
# count the chat model's tokens either.
CHARS_PER_TOKEN = 4
TURN_OVERHEAD_TOKENS = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` as one chat turn."""
    return -(-len(text) // CHARS_PER_TOKEN) + TURN_OVERHEAD_TOKENS
