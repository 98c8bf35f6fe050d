"""Measurements: pure functions from timelines and objects to numbers. One criterion per module."""
