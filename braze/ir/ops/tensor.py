"""tensor ops (filled in below)."""
