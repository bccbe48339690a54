"""Reports a learner's name or an answer's text cannot subvert: JSON, CSV gradebook, terminal table, HTML feedback,
Gradescope results.json and JUnit XML, each written atomically to a path opened without following links."""

from __future__ import annotations

import csv
import errno
import html
import io
import json
import os
import re
import secrets
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_XML_BAD = re.compile(r"[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class ReportPathError(OSError):
    pass


def _decodable(text: str) -> str:
    """The text with what UTF-8 cannot encode (a name's bytes that were not UTF-8, read with surrogateescape, or a
    lone surrogate) written as \\xNN, so that printing and writing it never fails."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "backslashreplace")


def terminal(text: str) -> str:
    """Text safe for a terminal: control characters (escape sequences, bidi overrides) shown as \\xNN, and bytes
    that are not UTF-8 too."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                        _decodable(str(text)))


def spreadsheet(text) -> str | int | float:
    """A CSV cell a spreadsheet reads as text, never as a formula (OWASP: prefix ' to = + - @ tab CR)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return text
    text = terminal(str(text))
    if text[:1] in ("=", "+", "-", "@", "\t", "\r", "|", "%") or text.lstrip()[:1] in ("=", "+", "-", "@"):
        return "'" + text
    return text


def xml_text(text: str) -> str:
    return _XML_BAD.sub("\ufffd", _decodable(str(text)))


def slug(name: str) -> str:
    """A file name for a learner: letters, digits, - and _, plus a short hash when that changed the name.

    Not unique on its own (a learner may be named like another's slug): :func:`file_names` makes the names of a
    whole class unique."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    out = re.sub(r"[^A-Za-z0-9_-]+", "_", plain).strip("_-.")[:60] or "learner"
    if out != name:
        import hashlib

        out += "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return out


def file_names(names) -> dict[str, str]:
    """learner -> file stem, unique across the class even ignoring case (a case-insensitive disk, a learner named
    after another's slug): in name order, a stem already taken gets -2, -3, ... The same class gets the same stems."""
    taken: set[str] = {"index"}  # the class's index page (feedback/index.html): a learner named index gets index-2
    out: dict[str, str] = {}
    for name in sorted(names, key=lambda n: (slug(n).lower(), n.encode("utf-8", "surrogatepass"))):
        base = stem = slug(name)
        n = 2
        while stem.lower() in taken:
            stem, n = f"{base}-{n}", n + 1
        taken.add(stem.lower())
        out[name] = stem
    return out


def shown(name: str) -> str:
    """A learner's or file's name as reports show it: bytes that are not UTF-8 (a folder named on another system)
    written as \\xNN, control characters escaped, and a line break or tab too (a folder named "bob\\n  16/16" must
    not print a row of its own in the instructor's table). The report's keys stay the names as found."""
    return terminal(name).replace("\n", "\\x0a").replace("\t", "\\x09")


def index_html(report: dict, stems: dict[str, str], folder: str) -> str:
    """The feedback folder's index page: every learner, their total and a link to their own page."""
    from html import escape as e
    from urllib.parse import quote

    rows = "".join(f"<tr><td><a href='{quote(stems[name])}.html'>{e(shown(name))}</a></td>"
                   f"<td>{rec.get('total', 0)}/{rec.get('max', 0)}</td><td>{e(rec.get('status', ''))}</td></tr>"
                   for name, rec in sorted(report["learners"].items(), key=lambda kv: stems[kv[0]]) if name in stems)
    return ("<!doctype html><meta charset='utf-8'><title>Feedback pages</title>"
            f"<h1>Feedback pages ({e(folder)})</h1><table><tr><th>learner</th><th>points</th><th>status</th></tr>"
            f"{rows}</table>")


def check_target(path: Path) -> None:
    """Refuse, before grading starts, a report path that is a folder or whose folder cannot be written."""
    if path.is_dir() and not path.is_symlink():
        raise ReportPathError(f"{path} is a folder: give a file name for the report (e.g. {path / 'grades.json'})")
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    if not os.access(parent, os.W_OK):
        raise ReportPathError(f"cannot write into {parent}")


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write data to a new file beside path and rename it over path: never follows a link at path (the link itself
    is replaced), never leaves a half-written report. When path has become a folder, writes path.N beside it and
    returns that path instead."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    parent = path.parent if str(path.parent) else Path(".")
    dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        tmp = f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                     0o644, dir_fd=dir_fd)
        try:
            view = memoryview(payload)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        target = path.name
        try:
            os.replace(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                os.unlink(tmp, dir_fd=dir_fd)
                raise
            n = 1
            while True:
                target = f"{path.name}.{n}"
                try:
                    os.stat(target, dir_fd=dir_fd, follow_symlinks=False)
                    n += 1
                except FileNotFoundError:
                    break
            os.replace(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return parent / target
    finally:
        os.close(dir_fd)


# --- the content -----------------------------------------------------------------------------------------

def exercise_ids(learners: dict) -> list[str]:
    return sorted({ex for rec in learners.values() for ex in rec.get("exercises", {})})


def notebook_names(learners: dict) -> list[str]:
    """The solutions notebooks the learners were graded on (each learner record's `notebooks`), in order."""
    return sorted({nb for rec in learners.values() for nb in rec.get("notebooks", {})})


def notebook_cell(book: dict | None) -> str:
    """`points/max` of one notebook, or what kept it from being graded."""
    if book is None:
        return ""
    if book.get("status") == "not-handed-in":
        return f"not handed in (0/{book.get('max', 0)})"
    if book.get("status") == "unreadable":
        return f"unreadable (0/{book.get('max', 0)})"
    return f"{book.get('points', 0)}/{book.get('max', 0)}" + (f" ({book['open']} open)" if book.get("open") else "")


def handed_in_line(name: str, rec: dict) -> str | None:
    """For a learner who handed in only some notebooks: their total over those, and which were not handed in."""
    books = rec.get("notebooks", {})
    missing = sorted(n for n, b in books.items() if b.get("status") == "not-handed-in")
    handed = {n: b for n, b in books.items() if n not in missing}
    if not missing or not handed:
        return None
    got, top = sum(b.get("points", 0) for b in handed.values()), sum(b.get("max", 0) for b in handed.values())
    opened = sum(b.get("open", 0) for b in handed.values())
    return (f"{shown(name)}: {got}/{top} over the notebook(s) handed in ({', '.join(_stem(n) for n in sorted(handed))})"
            + (f", {opened} point(s) not graded here" if opened else "")
            + f"; not handed in: {', '.join(_stem(n) for n in missing)} (the course total "
              f"{rec.get('total', 0)}/{rec.get('max', 0)} counts them as 0)")


def _stem(name: str) -> str:
    return name[:-6] if name.endswith(".ipynb") else name


def to_json(report: dict) -> str:
    return json.dumps(report, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def to_csv(report: dict) -> str:
    learners = report["learners"]
    ids = exercise_ids(learners)
    books = notebook_names(learners)
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_MINIMAL)
    w.writerow(["learner", "total", "max", "not graded here", "status"]
               + [c for nb in books for c in (f"{nb} points", f"{nb} max", f"{nb} status")]
               + [c for ex in ids for c in (ex, f"{ex} status")])
    for name, rec in learners.items():
        marks = rec.get("exercises", {})
        nbs = rec.get("notebooks", {})
        w.writerow([spreadsheet(name), rec.get("total", 0), rec.get("max", 0), rec.get("open", 0), rec.get("status", "")]
                   + [c for nb in books for c in ((nbs[nb]["points"], nbs[nb]["max"], nbs[nb]["status"]) if nb in nbs
                                                   else ("", "", ""))]
                   + [c for ex in ids for c in ((marks[ex]["points"], marks[ex]["status"]) if ex in marks else ("", ""))])
    return buf.getvalue()


TABLE_WIDTH = 100  # columns: the terminal table never prints a longer line (the CSV and JSON keep every detail)

# What the table says of exercises whose points alone do not tell (passed, partial and failed read from the points).
_GROUPS = {"not-answered": "not answered", "missing": "no answer cell", "error": "error", "timeout": "timeout",
           "review": "needs review", "not-graded": "not graded here"}
_NBSP = "\u00a0"  # keeps "ex03 2/5" on one line when the exercises wrap


def status_words(status: str) -> str:
    """A status as a reader says it: not-answered -> "not answered"."""
    return _GROUPS.get(status, status.replace("-", " "))


def _short_ids(ids: list[str]) -> dict[str, str]:
    """ex03_remove_the_sync -> ex03, where the part before the first _ names one exercise only."""
    heads = [ex.split("_", 1)[0] for ex in ids]
    return {ex: head if heads.count(head) == 1 else ex for ex, head in zip(ids, heads)}


def _exercises_text(exs: list[str], marks: dict, short: dict[str, str]) -> tuple[str, bool]:
    """"ex01 5/5, ex02 3/4*, ex03 0/6; not answered: ex04, ex05": points where they tell, else the status, grouped."""
    scored, groups, starred = [], {}, False
    for ex in exs:
        m = marks[ex]
        if m["status"] == "not-handed-in":
            continue
        star = "*" if m.get("open") else ""
        starred = starred or bool(star)
        if m["status"] in _GROUPS:
            groups.setdefault(_GROUPS[m["status"]], []).append(short[ex] + star)
        else:
            scored.append(f"{short[ex]}{_NBSP}{m['points']}/{m['max']}{star}")
    parts = [", ".join(scored)] * bool(scored) + [f"{word.replace(' ', _NBSP)}:{_NBSP}{', '.join(names)}"
                                                  for word, names in groups.items()]
    return "; ".join(parts), starred


def _wrap_text(text: str, width: int) -> list[str]:
    import textwrap

    return [line.replace(_NBSP, " ") for line in textwrap.wrap(text, width, break_on_hyphens=False)] or [""]


def table(report: dict, width: int = TABLE_WIDTH) -> str:
    """The terminal table, at most `width` columns: one row per learner and notebook with its points (and a total
    row where a class has several notebooks), then its exercises in short: `ex03 2/5`, `not answered: ex04`
    (`*`: some points not graded here). The CSV, JSON and feedback pages hold every check."""
    learners = report["learners"]
    ids = exercise_ids(learners)
    short = _short_ids(ids)
    books = notebook_names(learners)
    several = len(books) > 1
    names = {n: shown(n) for n in learners}
    name_w = max([len("learner")] + [len(t) for t in names.values() if len(t) <= 24])  # longer: a line of its own
    book_w = min(28, max([len("notebook")] + [len(_stem(b)) for b in books])) if several else 0
    rows: list[tuple[str, str, str, str]] = []  # learner, notebook, points, exercises
    starred = False
    for name, rec in learners.items():
        marks = rec.get("exercises", {})
        total = f"{rec.get('total', 0)}/{rec.get('max', 0)}" + ("*" if rec.get("open") else "")
        first = len(rows)
        if several:
            placed: set[str] = set()
            for b in books:
                book = rec.get("notebooks", {}).get(b) or {}
                exs = [ex for ex in book.get("exercises", []) if ex in marks]
                placed.update(exs)
                text, star = _exercises_text(exs, marks, short)
                starred = starred or star
                if book.get("status") in ("not-handed-in", "unreadable"):
                    text = status_words(book["status"])
                points = f"{book.get('points', 0)}/{book.get('max', 0)}" + ("*" if book.get("open") else "") if book else "-"
                rows.append(("", _cut(_stem(b), book_w), points, text))
            rest = [ex for ex in ids if ex in marks and ex not in placed]
            if rest:
                text, star = _exercises_text(rest, marks, short)
                starred = starred or star
                rows.append(("", "other", f"{sum(marks[e]['points'] for e in rest)}/{sum(marks[e]['max'] for e in rest)}",
                             text))
            rows.append(("", "total", total, ""))
        else:
            text, star = _exercises_text([ex for ex in ids if ex in marks], marks, short)
            starred = starred or star
            if not text and rec.get("status") not in (None, "graded"):
                text = status_words(str(rec["status"]))
            rows.append(("", "", total, text))
        if len(names[name]) <= name_w:
            rows[first] = (names[name],) + rows[first][1:]
        else:  # a long name on a line of its own, whole (cut only at the table's width)
            rows.insert(first, (_cut(names[name], width), None, "", ""))
    points = "points" if several else "total"  # one notebook: its points are the learner's total
    points_w = max([len(points)] + [len(r[2]) for r in rows if r[1] is not None])
    fixed = [name_w] + ([book_w] if several else []) + [points_w]
    indent = sum(fixed) + 2 * len(fixed)
    ex_w = max(24, width - indent)
    head = ["learner".ljust(name_w)] + (["notebook".ljust(book_w)] if several else []) + [points.ljust(points_w)]
    lines = ["  ".join(head + ["exercises"]), "  ".join("-" * w for w in fixed + [min(ex_w, 9)])]
    for name, label, points, text in rows:
        if label is None:
            lines.append(name)
            continue
        wrapped = _wrap_text(text, ex_w)
        left = [name.ljust(name_w)] + ([label.ljust(book_w)] if several else []) + [points.ljust(points_w)]
        lines.append("  ".join(left + [wrapped[0]]).rstrip())
        lines += [(" " * indent + more).rstrip() for more in wrapped[1:]]
    if starred or any(r.get("open") for r in learners.values()):
        lines += _wrap_text("* some checks were not graded on this machine (e.g. they need a CUDA GPU): those points "
                            "are still open; grade where they can run to include them", width)
    if any(short[ex] != ex for ex in ids):
        lines += _wrap_text("exercises by number (" + ", ".join(f"{short[ex]}{_NBSP}={_NBSP}{ex}" for ex in ids[:2])
                            + (", ..." if len(ids) > 2 else "") + "); the CSV, JSON and feedback pages hold every check",
                            width)
    return "\n".join(line if len(line) <= width else _cut(line, width) for line in lines)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


HELD = "held for review by an instructor: what your code gave is shown once it is cleared"


def shown_message(mark: dict, check: dict) -> str:
    """A check's message as the learner sees it. While its exercise is held for review, not what the code gave: an
    answer that touches the grading machinery could return what it read there (a hidden check's source), and the
    learner would read it on the spot (Gradescope shows visible tests at once). The instructor's report keeps all."""
    return HELD if mark.get("status") == "review" and check.get("status") != "passed" else check["message"]


def gradescope(rec: dict) -> str:
    """Gradescope's results.json for one learner: one test per check."""
    tests = []
    where = {ex: nb for nb, book in rec.get("notebooks", {}).items() for ex in book.get("exercises", [])}
    for ex, m in rec.get("exercises", {}).items():
        for cid, c in m.get("checks", {}).items():
            test = {"name": cid, "score": c["points"], "max_score": c["max"],
                    "status": "passed" if c["status"] == "passed" else "failed",
                    "output": f"{c['status']}: {shown_message(m, c)}" + (f" (exercise: {m['message']})" if m["status"] == "review" else ""),
                    "visibility": "after_published" if c.get("hidden") else "visible"}
            if ex in where:
                test["tags"] = [where[ex]]
            tests.append(test)
    books = "; ".join(f"{nb}: {notebook_cell(book)}" for nb, book in rec.get("notebooks", {}).items())
    out = {"score": rec.get("total", 0),
           "output": "; ".join([books] * bool(books) + rec.get("notes", [])) or "graded by graphcourse.grading",
           "tests": tests, "visibility": "visible", "stdout_visibility": "hidden",
           "extra_data": {"notebooks": {nb: {k: book.get(k) for k in ("status", "points", "max", "open")}
                                        for nb, book in rec.get("notebooks", {}).items()}}}
    return json.dumps(out, indent=1, ensure_ascii=True) + "\n"


def junit(report: dict) -> str:
    suites = ET.Element("testsuites", name="graphcourse.grading")
    for name, rec in report["learners"].items():
        cases = [(ex, cid, c) for ex, m in rec.get("exercises", {}).items() for cid, c in m.get("checks", {}).items()]
        suite = ET.SubElement(suites, "testsuite", name=xml_text(name), tests=str(len(cases)),
                              failures=str(sum(c["status"] in ("failed", "review", "missing", "not-handed-in", "not-answered")
                                               for _, _, c in cases)),
                              errors=str(sum(c["status"] in ("error", "timeout") for _, _, c in cases)),
                              skipped=str(sum(c["status"] == "not-graded" for _, _, c in cases)))
        if rec.get("notebooks"):  # points per notebook, and whether it was handed in
            props = ET.SubElement(suite, "properties")
            for nb, book in rec["notebooks"].items():
                ET.SubElement(props, "property", name=xml_text(f"{nb} points"), value=xml_text(notebook_cell(book)))
        for ex, cid, c in cases:
            case = ET.SubElement(suite, "testcase", classname=xml_text(f"{name}.{ex}"), name=xml_text(cid))
            status = c["status"]
            exercise_status = rec["exercises"][ex]["status"]
            if exercise_status == "review":
                ET.SubElement(case, "failure", message="needs review").text = xml_text(rec["exercises"][ex]["message"])
            elif status == "not-graded":
                ET.SubElement(case, "skipped", message=xml_text(c["message"]))
            elif status in ("error", "timeout"):
                ET.SubElement(case, "error", message=xml_text(status)).text = xml_text(c["message"])
            elif status != "passed":
                ET.SubElement(case, "failure", message=xml_text(status)).text = xml_text(c["message"])
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


_STATUS_COLOUR = {"passed": "#1a7f37", "partial": "#9a6700", "failed": "#cf222e", "error": "#cf222e",
                  "timeout": "#cf222e", "missing": "#57606a", "not-answered": "#57606a", "review": "#8250df", "not-graded": "#57606a",
                  "not-handed-in": "#57606a"}


def feedback_html(name: str, rec: dict, hints: dict[str, str]) -> str:
    """One learner's feedback page: each exercise's status, points, the check messages and the hint."""
    e = html.escape
    rows = []
    where = {ex: nb for nb, book in rec.get("notebooks", {}).items() for ex in book.get("exercises", [])}
    current = None
    for ex, m in rec.get("exercises", {}).items():
        if where.get(ex) != current and where.get(ex) in rec.get("notebooks", {}):  # one heading per notebook
            current = where[ex]
            book = rec["notebooks"][current]
            colour = "#57606a" if book.get("status") != "graded" else "#1a7f37" if book["points"] == book["max"] - book.get("open", 0) else "#9a6700"
            rows.append(f"<h2 class='notebook'><code>{e(current)}</code> <span style='color:{colour}'>"
                        f"{e(notebook_cell(book))}</span></h2>")
            if book.get("status") == "not-handed-in":
                rows.append(f"<p>Not handed in: no copy of <code>{e(current)}</code> was found among your notebooks, "
                            f"so its exercises ({e(', '.join(book.get('exercises', [])))}) earn nothing. Hand in your copy "
                            "of it to have them graded.</p>")
            elif book.get("file") and book["file"] != current:
                rows.append(f"<p>Graded from your file <code>{e(terminal(book['file']))}</code>.</p>")
        if m["status"] == "not-handed-in":
            continue
        colour = _STATUS_COLOUR.get(m["status"], "#57606a")
        checks = "".join(
            f"<li><code>{e(cid.split('/', 1)[-1])}</code>{' (hidden)' if c.get('hidden') else ''}: "
            f"<b>{c['points']}/{c['max']}</b> {e(status_words(c['status']))}"
            f"{'' if c['status'] == 'passed' else ' — ' + e(terminal(shown_message(m, c)))}</li>"
            for cid, c in m.get("checks", {}).items())
        hint = hints.get(ex, "")
        rows.append(
            f"<section><h3><code>{e(ex)}</code> <span style='color:{colour}'>{m['points']}/{m['max']} {e(status_words(m['status']))}"
            f"</span>{' <small>(' + str(m['open']) + ' not graded here)</small>' if m.get('open') else ''}</h3>"
            f"<p>{e(terminal(m['message']))}</p><ul>{checks}</ul>"
            + (f"<details><summary>Hint</summary><p>{e(hint)}</p></details>" if hint and m["status"] != "passed" else "")
            + "</section>")
    notes = "".join(f"<li>{e(terminal(n))}</li>" for n in rec.get("notes", []))
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>Feedback: {e(terminal(name))}</title><style>body{{font-family:system-ui,sans-serif;max-width:50em;"
            "margin:2em auto;padding:0 1em;line-height:1.45}section{border-top:1px solid #d0d7de;padding:.4em 0}"
            "h2{font-size:1.2em;margin-top:1.4em}h3{font-size:1.05em}code{background:#f6f8fa;padding:0 .2em}</style></head><body>"
            f"<h1>Feedback for {e(terminal(name))}</h1>"
            f"<p><b>{rec.get('total', 0)}/{rec.get('max', 0)}</b> points"
            + (f" ({rec['open']} not graded on this machine)" if rec.get("open") else "") + "</p>"
            + (f"<ul>{notes}</ul>" if notes else "") + "".join(rows) + "</body></html>\n")
