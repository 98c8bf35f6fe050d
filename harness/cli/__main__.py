"""`python -m harness.cli`: the gpupoc command."""

from harness.cli import main

raise SystemExit(main())
