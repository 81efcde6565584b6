"""Test double: shadows nvidia-ml-py so a module run sees "pynvml not installed"."""

raise ImportError("pynvml hidden by tests/unit/doubles/no_pynvml")
