from __future__ import annotations

from jobstate.main import main

raise SystemExit(main())
