"""The bottom layer every room of ``graphcourse`` reads, and none re-implements.

- :mod:`~graphcourse.core.paths`: where the course's folders and recorded data live;
- :mod:`~graphcourse.core.exercise_format`: how a solutions notebook is laid out (headings,
  answer markers, check metadata), read by the builder, the self-check and the grader alike;
- :mod:`~graphcourse.core.child`: running a snippet in a child Python and reading how it ended;
- :mod:`~graphcourse.core.cli`: how a command ends on an error: one line that says what to do.

Nothing here imports from the rooms above it (``gpulib``, ``lessons``, ``grading``,
``authoring``); ``tests/test_layers.py`` fails on an import that points upward.
"""
