"""/api/auth (better-auth with its `username` plugin), the OAuth 2.0 endpoints and the account pages."""
