"""Events shown to people: one renderer per medium (terminal text here; HTML follows)."""
