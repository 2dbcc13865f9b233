"""Rebuildable state: the SQLite index and the working trees."""
