"""Doors from other libraries into the agents layer (each behind its own optional extra)."""
