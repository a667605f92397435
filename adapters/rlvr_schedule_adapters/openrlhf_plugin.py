"""Placeholder until the adapter lands; imports no framework."""
