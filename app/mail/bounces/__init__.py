"""Bounces and complaints in: the reports (`POST /webhooks/bounces`, the providers' webhooks, ARF, the
VERP mailbox read over IMAP), their classes, and the blocked-sender rule."""
