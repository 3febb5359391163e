"""The C backend: generated C compiled with cffi (a plugin)."""
