"""Maintenance scripts of the repository (run as modules from its root: `python -m scripts.NAME`)."""
