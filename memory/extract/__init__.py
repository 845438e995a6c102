"""Extraction: the extractor interface, the LLM extractor, the offline rules
(``rules/``) and the guards every candidate passes before it is stored."""
