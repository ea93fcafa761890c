from __future__ import annotations

from jobstate.cli import main

raise SystemExit(main())
