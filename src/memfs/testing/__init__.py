"""Contract suites shipped with memfs: a new Backend or Index runs the whole suite by
subclassing (needs pytest, from the dev extra)."""
