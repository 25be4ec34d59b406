"""Automations: their routes and rules, and the runs that walk a contact through their steps."""
