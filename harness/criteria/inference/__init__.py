"""Inference criteria (ACCEPTANCE.md, Inference 1-5)."""
