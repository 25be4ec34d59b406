"""Feeds under /v1 (openmagpie-compatible): feeds, sources, items, telemetry, connectors, polling."""
