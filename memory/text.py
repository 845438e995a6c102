"""Text normalisation shared by the guards, scoring and retrieval.

``compact`` and ``tokens`` implement SPEC §4's "compact" form. Tokenisation is
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
# Zero-width and bidi controls carry no meaning for matching and are a common
# way to smuggle text past filters ("sys\u200btem").
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

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
    return _INVISIBLE.sub("", text)


def compact(text: str) -> str:
    """Lowercase; drop URLs, custom emoji and mentions; non-alphanumerics → spaces."""
    value = unicodedata.normalize("NFKC", strip_invisible(text or ""))
    value = _URL.sub(" ", value)
    value = _CUSTOM_EMOJI.sub(" ", value)
    value = _MENTION.sub(" ", value)
    value = value.casefold()
    return " ".join(_WORD.findall(value))


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
    out: list[str] = []
    for run in value.split():
        out.extend(_split_run(run))
    return out


def is_no_space_token(token: str) -> bool:
    return bool(token) and _is_no_space_char(token[0])


def significant_tokens(text: str, *, min_len: int = 3, limit: int | None = None) -> list[str]:
    """Tokens long enough to carry meaning (CJK bigrams always count), first ``limit``."""
    out = [t for t in tokens(text) if len(t) >= min_len or is_no_space_token(t)]
    return out if limit is None else out[:limit]
