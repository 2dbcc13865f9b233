"""memfs: a self-hosted, versioned Markdown memory store for AI agents."""

__version__ = "0.1.0"
