"""A trigger's actions, one module each, behind the small protocol of ``base``."""
