"""The web console under /console: server-rendered pages over the same services as the API routes."""
