"""Memory profiles: what the model sees of a long conversation, decided cache-aware and
persisted, with everything it no longer sees kept recallable (see docs/memory.md)."""
