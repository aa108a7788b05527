"""Pure DataFrame → DataFrame transforms with explicit parameters (no I/O, no sessions)."""
