"""OAuth 2.0 for integrations of the email API: the authorization code flow with PKCE and refresh
tokens, built on Authlib's server components."""
