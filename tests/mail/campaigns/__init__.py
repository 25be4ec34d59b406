"""Tests of app/mail/campaigns/."""
