"""Grade learners' exercise notebooks, each learner confined: ``python -m graphcourse.grading``.

The grader lives in :mod:`graphcourse.grading` (see docs/grading.md); this module is its entry point.
"""

from __future__ import annotations

import sys

from .cli import main
from .observe import inputs, observe

__all__ = ["main", "observe", "inputs"]

if __name__ == "__main__":
    sys.exit(main())
