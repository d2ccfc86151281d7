"""``python -m pipeline.cli``: the paperkb command."""

import sys

from pipeline.cli import main

sys.exit(main())
