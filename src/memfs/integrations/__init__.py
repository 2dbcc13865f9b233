"""Adapters from memfs to agent frameworks; each imports its framework only when used.

- ``memfs.integrations.anthropic``: ``MemfsMemoryTool``, Claude's memory tool backed
  by a memfs agent (install ``memfs[anthropic]``).
"""
