"""reduce ops (filled in below)."""
