"""The email campaign API (seed 000, SendFox-compatible)."""
