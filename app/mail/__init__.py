"""The email campaign API (SendFox-compatible; docs/email-api.md)."""
