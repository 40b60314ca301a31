"""Nexmark, the standard streaming benchmark, on headwater (python -m bench.nexmark)."""
