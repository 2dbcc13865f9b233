"""``python -m memfs.cli``: the ``memfs`` command."""

from memfs.cli import main

raise SystemExit(main())
