"""Pure DataFrame → DataFrame transforms of the Zhejiang tables (no I/O, no sessions)."""
