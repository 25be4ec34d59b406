"""Tests of app/mail/bounces/."""
