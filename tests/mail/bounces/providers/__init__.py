"""Tests of app/mail/bounces/providers/."""
