"""Whether a hit is about the members a query names.

"What did Alice realise after her race?" asks about Alice. A message in
which Bob tells of his own race matches every word of it but the name, and
the name is what search strips before ranking (it is rarely in a member's
own messages). Worse, the messages that name Alice are often Bob talking
*to* her ("Thanks, Alice! The race was…"), and Alice's own messages that
match are often her asking about Bob's ("What got you into running?").

So when a query names members, strict search counts as covering it only
hits attributable to one of them:

* a fact whose subject is the member;
* a message the member wrote that speaks of themselves (``about_author``:
  a question or a compliment aimed at someone else does not count);
* a message by anyone that names the member other than in address: "Alice
  told me…" counts, "Thanks, Alice!" does not.

Otherwise memory holds nothing about *that member* doing what the query
asks, and strict search answers with no hit rather than with someone else's
story. Such a hit must also be among the first ``NAMED_COVER_WITHIN`` of
strict search's hits. The hits themselves are not filtered: a covered query
keeps them all.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from memory.models import Hit
from memory.retrieval.query import MemberNames, NameMatch, find_names
from memory.retrieval.voice import WORD, speaks_of_self, speaks_to_other, statement_share

__all__ = [
    "NAMED_COVER_WITHIN",
    "about_author",
    "addressed",
    "attributed",
]
# How far down strict search's ranking the attributable hit that covers a
# query may be. Attributable evidence of an answerable question leads the
# ranking (the first hit in 87 % of LoCoMo dev's questions); when the member
# only asked about someone else's story, the story leads and the member's
# hits trail. Measured on LoCoMo and REALTALK dev with the budget of the
# gate's calibration (strict recall@10 loses at most 3 points): share of
# LoCoMo's false-premise questions with no strict hit / strict recall@10
# change on LoCoMo, REALTALK — anywhere 22.5 % (−0.4, −0.7); within 5
# 33.8 % (−1.7, −1.8); within 3 38.0 % (−2.1, −2.2); within 2 50.7 %
# (−3.2, −2.9); first only 71.8 % (−8.7, −9.0).
NAMED_COVER_WITHIN = 3

# Words that open an address: "Hey Alice,", "Thanks Alice!".
_GREETINGS = frozenset(
    """
    hey hi hello hiya yo thanks thank thx congrats congratulations wow oh aw aww ah yes yeah yep
    sure ok okay dear morning night bye love sorry well haha lol omg hallo danke hola gracias
    привет спасибо
    """.split()
)
# What may follow a name in address (the end of the text counts too).
_ADDRESS_END = re.compile(r"\s*(?:[,!?.:;…]|$)")


def about_author(text: str, author_id: str, names: MemberNames) -> bool:
    """Whether a message speaks of its author: a first-person word, or — chat
    drops "I" ("baked two loaves") — a statement that neither speaks to nor
    addresses someone else. "What got you into running?" and "That race
    sounds great, Mel!" are about the other member."""
    if speaks_of_self(text):
        return True
    if speaks_to_other(text) or statement_share(text) == 0.0:
        return False
    return not any(
        author_id not in m.user_ids and addressed(text, m) for m in find_names(text, names)
    )


def addressed(text: str, match: NameMatch) -> bool:
    """Whether the name at ``match`` addresses its member ("Thanks, Alice!")
    rather than speaking of them: followed by punctuation or the end, and
    preceded by the start of a sentence, a comma or a greeting.

    Wider than ``memory.retrieval.addressed.addresses``, which learns names
    and so takes only the surest forms at a message's edges; here a missed
    address credits a member with someone else's story, so "Yeah Mel, let's
    go" and "Woah, Caroline, it sounds…" count too."""
    if not _ADDRESS_END.match(text, match.end):
        return False
    before = text[: match.start].rstrip()
    if not before or before[-1] in ",.!?;:(-—":
        return True
    words = WORD.findall(before[-40:])
    return bool(words) and words[-1].casefold() in _GREETINGS


def attributed(hit: Hit, named: Collection[str], names: MemberNames) -> bool:
    """Whether ``hit`` is about one of the ``named`` member ids (see the module)."""
    if not named:
        return True
    if hit.subject in named and (hit.kind == "fact" or about_author(hit.text, hit.subject, names)):
        return True
    return any(
        not m.user_ids.isdisjoint(named) and not addressed(hit.text, m)
        for m in find_names(hit.text, names)
    )
