"""Tidings: email campaigns, feeds and watches, and account auth in one service."""
