"""``python -m pipelines.notebooks [--check]``: see the package's docstring."""

import sys

from pipelines.notebooks import main

sys.exit(main())
