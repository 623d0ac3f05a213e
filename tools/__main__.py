"""``python -m tools ...``: the developer tools (see tools/cli.py)."""

from tools.cli import main

raise SystemExit(main())
