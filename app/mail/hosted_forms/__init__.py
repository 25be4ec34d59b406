"""The hosted sign-up forms: their public pages, the double opt-in email, and the confirmation that
adds the contact."""
