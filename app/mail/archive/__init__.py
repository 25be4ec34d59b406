"""What a reader opens without signing in: the web version of an email they got (a signed link) and
an account's public archive of the campaigns it chose to publish (pages and an Atom feed)."""
