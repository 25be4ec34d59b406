"""Tests of app/mail/automations/."""
