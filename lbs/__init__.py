"""lbs: search in cooperative partially observable games (Hanabi), batched on one device."""

from .memory import keep_freed_memory

keep_freed_memory()
