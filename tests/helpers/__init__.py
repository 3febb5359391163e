"""Shared helpers for the test suite (importable because pytest adds tests/ to the path)."""
