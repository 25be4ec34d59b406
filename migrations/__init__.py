"""Alembic's script directory; installed as the package `app._migrations` (see setup.py)."""
