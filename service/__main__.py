"""``python -m service ...``: Eddy's command line."""

from service.cli import main

raise SystemExit(main())
