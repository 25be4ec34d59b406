"""`python -m app` runs the `tidings` command."""

from app.launch import main

main()
