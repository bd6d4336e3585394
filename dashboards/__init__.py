"""Filled by later issues."""
