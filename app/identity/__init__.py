"""Accounts, users, passwords, personal tokens, and the `current_*` dependencies."""
