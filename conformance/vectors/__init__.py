"""The conformance vectors, one module per file of conformance/ (conformance/generate.py writes them)."""
