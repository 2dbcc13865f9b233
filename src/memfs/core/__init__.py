"""The use cases every edge calls: the store, runs, triggers, maintenance, keys."""
