"""Helpers shared by benchmark packages (templates, stable seeding, bootstrap CIs)."""
