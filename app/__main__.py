"""`python -m app` runs the `tidings` command."""

from app.cli import main

main()
