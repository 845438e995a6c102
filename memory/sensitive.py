"""Secret-shaped text: the words that introduce a secret and the shapes of keys
and tokens.

The guards refuse a fact that contains either (``SECRET_WORDS``,
``SECRET_SHAPES``: both match the lower-cased, de-obfuscated form the guards
build). The snapshot shows journal lines to operators, so ``mask_secrets``
replaces the secret itself there: the value that follows a secret word ("my
password is hunter2" → "my password is [redacted]") and anything shaped like a
key or token.

Words count only as whole words: "tokenizer", "passed", "pinned" and
"pinball" are not secrets. "token" counts in the singular only ("arcade
tokens" are not), and "pin" only with an owner ("my pin", "Ana's pin") or as
"pin code"/"pin number" — a pin is also a badge or a map marker.
"""

from __future__ import annotations

import re
import unicodedata

from memory.text import fold_lookalikes, is_invisible

MASK = "[redacted]"

_SEP = r"[\s_-]?"
_TERMS = (
    # passwords and their abbreviations
    r"passwords?", r"passwd", r"pwd", r"pw", r"pword", rf"pass{_SEP}words?",
    rf"pass{_SEP}codes?", rf"pass{_SEP}phrases?",
    # keys
    rf"api{_SEP}keys?", rf"access{_SEP}keys?", rf"private{_SEP}keys?", rf"secret{_SEP}keys?",
    rf"(?:ssh|gpg|pgp|signing|encryption|recovery|license|licence|product|wifi|wi-fi|wpa2?)"
    rf"{_SEP}keys?",
    # tokens, cookies, credentials
    r"token", rf"(?:access|auth|bearer|refresh|session|api|bot|discord|github|oauth|id)"
    rf"{_SEP}tokens?",
    rf"(?:session|auth){_SEP}cookies?", r"secrets?", r"credentials?", r"creds",
    # one-time and recovery codes, seed phrases
    rf"(?:2fa|mfa|otp|totp|hotp|one{_SEP}time|verification|authenticator|auth|backup|recovery|"
    rf"security|login|sms|2{_SEP}step){_SEP}codes?",
    rf"one{_SEP}time{_SEP}pass(?:words?|codes?)",
    rf"(?:seed|recovery|mnemonic|backup|wallet){_SEP}(?:phrases?|words)",
    # card and identity numbers
    r"cvv2?", r"cvc", r"ssn", r"social security numbers?",
    r"(?:credit|debit|bank)\s+card\s+numbers?",
    rf"pins?{_SEP}(?:codes?|numbers?)",
)  # fmt: skip
SECRET_TERMS = "(?:" + "|".join(_TERMS) + ")"
# Terms whose value is a phrase: the rest of the clause is masked, not one word.
_PHRASE_TERMS = (
    rf"(?:pass{_SEP}phrases?|(?:seed|recovery|mnemonic|backup|wallet){_SEP}(?:phrases?|words))"
)

# "pin" with an owner, unless a content word follows ("Ana's pin collection").
_PIN_OWNER = (
    r"(?:'s|\b(?:my|your|his|her|their|our|bank|card|atm|debit|credit|sim|phone|door|lock|"
    r"alarm|safe))\s+pin\b"
)
_PIN = (
    rf"{_PIN_OWNER}(?!\s+(?!(?:is|was|for|to|of|on|at|and|or|code|number)\b)[^\W\d_]{{2,}})"
    r"|\bpin\s*[:=]"
)

SECRET_WORDS = re.compile(rf"\b{SECRET_TERMS}\b|{_PIN}")
SECRET_SHAPES = re.compile(
    r"\bsk-[a-z0-9_\-]{8,}|\b(?:sk|pk|rk)_(?:live|test)_[a-z0-9]{16,}"
    r"|\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[a-z0-9_]{16,}"
    r"|\bxox[abposr]-[a-z0-9-]{8,}|\b(?:akia|asia)[0-9a-z]{16}\b|\baiza[0-9a-z_-]{35}"
    r"|\b[mno][a-z0-9_-]{23,27}\.[a-z0-9_-]{6}\.[a-z0-9_-]{27,}"
    r"|\beyj[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}"
    r"|\bbearer\s+[a-z0-9._~+/-]{16,}|-----begin [a-z ]*private key-----"
    # Long hex on its own; inside a link it is usually a hash ("/commit/3f2a…").
    r"|(?<![\w/=#%?&.+-])[0-9a-f]{32,}(?![\w/-]|\.\w)"
)

# -- masking --------------------------------------------------------------------

_LINK = r"(?:\s*(?::|=|->|=>)\s*|\s+(?:is|are|was|were|equals)\s+(?:now\s+)?(?:[:=]\s*)?)"
_QUOTED = r"\"[^\"]{1,200}\"|'[^']{1,200}'|`[^`]{1,200}`"
# A one-word value ends before trailing punctuation ("hunter2." → "hunter2").
_WORD_VALUE = rf"(?:{_QUOTED}|\S*[^\s.,;:!?)\]}}'\"])"
_PHRASE_VALUE = rf"(?:{_QUOTED}|[^.;!?\n]{{1,200}})"
# Up to four words between the secret word and its value ("pw for the wiki is").
_BRIDGE = r"(?:\s+(?!(?:is|are|was|were|equals)\b)[\w'-]+){0,4}?"
_PHRASE_VALUE_AFTER = re.compile(rf"\b{_PHRASE_TERMS}\b{_BRIDGE}{_LINK}(?P<value>{_PHRASE_VALUE})")
_WORD_VALUE_AFTER = re.compile(
    rf"(?:\b{SECRET_TERMS}\b|\bpins?\b){_BRIDGE}{_LINK}(?P<value>{_WORD_VALUE})"
)
_HEX_RUN = re.compile(r"(?<![0-9a-f])[0-9a-f]{32,}(?![0-9a-f])")
# Long key-like runs, judged on the original text: base64/URL-safe alphabets
# with digits and both cases ("Q2hhbmdlTWU0dGhlV2lraUFjY2Vzcw").
_KEYLIKE_RUN = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{32,}={0,2}(?![\w+/=-])")


def _is_keylike(run: str) -> bool:
    return (
        any(c.isdigit() for c in run)
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
    )


def _folded(text: str) -> tuple[str, list[int]]:
    """Lower-cased, NFKC, invisible characters dropped; and each character's
    index in ``text``."""
    chars: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if is_invisible(ch):
            continue
        for c in unicodedata.normalize("NFKC", ch).casefold().replace("\u2019", "'"):
            chars.append(c)
            where.append(i)
    return "".join(chars), where


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, merged ``(start, end)`` spans of ``text`` that are secrets."""
    spans: list[tuple[int, int]] = []
    base, where = _folded(text)
    if where:
        for form in {base, fold_lookalikes(base), fold_lookalikes(base, one="l")}:
            for m in _PHRASE_VALUE_AFTER.finditer(form):
                spans.append((where[m.start("value")], where[m.end("value") - 1] + 1))
            for m in _WORD_VALUE_AFTER.finditer(form):
                spans.append((where[m.start("value")], where[m.end("value") - 1] + 1))
        for shape in (SECRET_SHAPES, _HEX_RUN):
            for m in shape.finditer(base):
                spans.append((where[m.start()], where[m.end() - 1] + 1))
    for m in _KEYLIKE_RUN.finditer(text):
        if _is_keylike(m.group(0)):
            spans.append(m.span())
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def mask_secrets(text: str) -> str:
    """``text`` with every secret (see ``secret_spans``) replaced by ``[redacted]``."""
    out: list[str] = []
    last = 0
    for start, end in secret_spans(text):
        out.append(text[last:start])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)
