"""Pure rules: ids and paths, content, the log format, chunks, links, signatures."""
