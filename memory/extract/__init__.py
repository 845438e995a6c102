"""Extraction: turning a message into fact candidates, and refusing bad ones.

``base`` is the extractor interface; ``llm`` the LLM extractor; ``rules/``
the offline rule-based one (``extractor``, its ``builders`` and ``lexicon``);
``guards`` the normalisation and grounding every candidate passes before it
is stored, with ``injection`` refusing instruction-like text and secrets."""
