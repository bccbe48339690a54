# attack: floods the output (hundreds of MB over stdout, stderr and display), to exhaust the grader's memory or disk
# honest: ex01_bucket_picker
# where: ex02_keep_outputs
import sys
_line = "x" * 1_000_000
for _ in range(150):
    print(_line)
    print(_line, file=sys.stderr)
