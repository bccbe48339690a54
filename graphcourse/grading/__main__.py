"""Grade learners' exercise notebooks, each learner confined: ``python -m graphcourse.grading``.

The command line itself is :mod:`graphcourse.grading.cli` (see docs/grading.md); this file only runs it.
"""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
