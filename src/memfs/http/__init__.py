"""The HTTP edge of memfs: routing on the raw path, conventions, and route handlers."""
