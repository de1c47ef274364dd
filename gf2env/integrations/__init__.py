"""Adapters to other libraries (each behind its own optional extra)."""
