"""review: the moderators' review queue."""
