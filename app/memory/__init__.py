"""What the bot remembers of a person from one conversation to the next (docs/memory.md)."""
