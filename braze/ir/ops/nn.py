"""nn ops (filled in below)."""
