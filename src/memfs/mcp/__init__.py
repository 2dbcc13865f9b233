"""memfs over the Model Context Protocol: one tool table, two transports.

``tools`` is the table (names, JSON schemas, descriptions for a model, the scope each
needs); ``local`` answers it with the core (``memfs mcp --data`` and ``/mcp`` in
``memfs serve``), ``remote`` with the Python client (``memfs mcp --url``); ``server``
puts the table behind the official ``mcp`` SDK's stdio and Streamable HTTP transports.
"""
