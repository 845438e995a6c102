"""Whether a voice utterance addresses the bot: its name as a wake word.

A wake word counts when it is said as a whole word (or words) where people
say a name to call someone — as the first or second word ("Guildlore, what
…", "hey guildlore …", "ok guildlore …") or the last ("… what do you think,
guildlore?"). A name further into a sentence ("I think guildlore forgot") is
talk *about* the bot, not *to* it, and gets no reply. Speech-to-text
punctuation is too unreliable to tell the two apart by commas.

Matching ignores case, accents and punctuation (Unicode case folding, NFKD
without combining marks), and the spaces speech-to-text puts inside a name:
"Guild Lore", "guild-lore" and "GuildLore" all match the wake word "guildlore".
Pure functions, no Discord imports.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

# The name may follow one word of greeting ("hey", "ok", "so").
LEAD_WORDS = 2
# A spoken name split into more pieces than this is not one name.
MAX_PIECES = 4

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded, without accents, punctuation or underscores."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return [w for w in _WORD.findall(plain.replace("_", " ")) if w]


def wake_keys(names: Iterable[str]) -> tuple[str, ...]:
    """Each usable name as one key (its words joined); names without letters or
    digits, or of one character, are dropped."""
    keys = ("".join(words(n)) for n in names)
    return tuple(dict.fromkeys(k for k in keys if len(k) > 1))


def addresses(utterance: str, keys: Sequence[str]) -> bool:
    """Whether ``utterance`` says one of ``keys`` (from ``wake_keys``) in a vocative position."""
    said = words(utterance)
    if not keys or not said:
        return False
    wanted = set(keys)
    for start in range(len(said)):
        joined = ""
        for end in range(start + 1, min(len(said), start + MAX_PIECES) + 1):
            joined += said[end - 1]
            if joined in wanted and (start < LEAD_WORDS or end == len(said)):
                return True
    return False
