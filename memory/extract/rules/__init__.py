"""The offline, rule-based extractor: first-person statements rewritten in the
third person about their author."""
