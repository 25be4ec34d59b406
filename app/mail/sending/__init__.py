"""The delivery engine: due campaigns -> deliverables (the queue) -> render -> transport (SMTP or Maildir)."""
