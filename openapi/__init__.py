"""The committed OpenAPI documents; installed as the package `app._openapi` (see setup.py)."""
