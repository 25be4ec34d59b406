"""The `tidings` commands beyond those in app/cli.py, one module a group; importing one registers it."""
