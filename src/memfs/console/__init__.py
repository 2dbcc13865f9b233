"""The read-only web console at /console: server-rendered pages over the core's reads."""
