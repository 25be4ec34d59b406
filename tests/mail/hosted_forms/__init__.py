"""Tests of app/mail/hosted_forms/."""
