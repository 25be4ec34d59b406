"""The `tidings` command groups, one module a group (each its own Typer, added to the command by
app/cli.py), over common.py, what they share."""
