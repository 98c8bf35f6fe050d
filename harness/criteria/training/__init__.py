"""Batch training criteria (ACCEPTANCE.md, Batch training 1-5)."""
