"""The one small exception hierarchy of graphcourse: every error says what happened, why, and what to do."""

from __future__ import annotations


class GraphCourseError(Exception):
    """Base of every error graphcourse raises on purpose; catch this to catch them all."""


class NoCudaError(GraphCourseError, RuntimeError):
    """A real CUDA graph was asked for on a machine without a CUDA GPU."""

    def __init__(self, what: str = "this step") -> None:
        self.what = what
        super().__init__(
            f"{what} needs a CUDA GPU, and there is none here (torch.cuda.is_available() is False). "
            f"A CUDA graph is recorded from and replayed on a GPU stream, so it cannot be emulated by torch on a CPU. "
            f"The lesson shows results recorded on a GPU instead (graphcourse.lessons.reference.load_reference()); "
            f"the toygraph twin of this step runs anywhere."
        )


class ReferenceDataMissingError(GraphCourseError, FileNotFoundError):
    """The recorded GPU results (data/gpu_reference.json) are not where the course expects them."""


class ReferenceDataError(GraphCourseError, KeyError):
    """The recorded GPU results lack a section or field a lesson asked for."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""


class BatchShapeError(GraphCourseError, ValueError):
    """A batch does not fit the static buffer it is copied into (wrong rows, row shape or dtype)."""
