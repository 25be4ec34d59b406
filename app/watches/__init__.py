"""/v1 watches: action chains over feed items, their runs and deliveries, and the engines they use."""
