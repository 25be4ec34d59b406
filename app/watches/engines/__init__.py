"""Engines: what scores an item against instructions (semantic_filter) and fills named fields
(extract). `registry.Engines` holds one of each registered kind per process."""
