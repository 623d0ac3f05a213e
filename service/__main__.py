"""``python -m eddy ...``: Eddy's command line."""

from eddy.cli import main

raise SystemExit(main())
