"""lbs: search in cooperative partially observable games (Hanabi), batched on one device."""
