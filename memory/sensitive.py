"""Secret-shaped text: the words that introduce a secret and the shapes of keys
and tokens.

The guards refuse a fact that contains either (``SECRET_WORDS``,
``SECRET_SHAPES``: both match the lower-cased, de-obfuscated form the guards
build).

Words count only as whole words: "tokenizer", "passed", "pinned" and
"pinball" are not secrets. "token" counts in the singular only ("arcade
tokens" are not), and "pin" only with an owner ("my pin", "Ana's pin") or as
"pin code"/"pin number" — a pin is also a badge or a map marker.
"""

from __future__ import annotations

import re

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
