"""A throw-away sixth source kind for tests/e2e/test_sixth_kind.py: a folder of ``.txt``
files, one document each. Everything the kind is lives in this folder; registering it is one
line (``registry.KINDS``)."""
