"""Campaigns: their routes, rules, the checks before a send, the preview, the report and the controls."""
