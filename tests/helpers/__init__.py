"""Child-process programs for the crash, race and CLI tests (run as scripts)."""
