"""Deciding each check outside every kernel: the learner's observations against the model answer's, as plain data."""

from __future__ import annotations

import math
import re

from ..core.exercise_format import NEEDS
from .assignment import Check, Exercise
from .observe import BUILTIN_NAMES
from .runner import ExerciseRun

STATUSES = ("passed", "partial", "failed", "error", "timeout", "missing", "review", "not-graded", "not-handed-in",
            "not-answered")


def _num(x) -> bool:
    return type(x) in (int, float)


def same(model, learner, tol: float) -> bool:
    """Plain-data equality: exact types (True is not 1), floats within a relative tolerance."""
    if _num(model) and _num(learner):
        if model == learner:
            return True
        if tol <= 0:
            return False
        return math.isfinite(model) and math.isfinite(learner) and abs(model - learner) <= tol * max(abs(model), abs(learner), 1e-300)
    if type(model) is not type(learner):
        return False
    if isinstance(model, list):
        return len(model) == len(learner) and all(same(a, b, tol) for a, b in zip(model, learner))
    if isinstance(model, dict):
        return model.keys() == learner.keys() and all(same(model[k], learner[k], tol) for k in model)
    return model == learner


class _Unplain:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        if " " in self.name:  # the grader's own reason (too large, voided), not a type name
            return f"<{self.name}>"
        return f"<a {self.name} object, not plain data>"


def _shown(value):
    if isinstance(value, dict):
        if set(value) == {"unplain"}:
            return _Unplain(str(value["unplain"]))
        if set(value) == {"float"}:
            return float(value["float"])
        return {k: _shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


def short(value, limit: int = 120) -> str:
    text = repr(_shown(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _record_text(record: dict, said: str | None = None) -> str:
    if not isinstance(record, dict):
        return "something unreadable"
    if "raised" in record:
        return f"raised {record['raised']}" + (f" ({_clip(said, 300)})" if isinstance(said, str) and said else "")
    v = record.get("value")
    if isinstance(v, dict) and set(v) == {"unplain"}:
        if " " in str(v["unplain"]):  # the grader's own reason: voided, or too large
            return f"did not count ({v['unplain']})"
        return f"returned a {v['unplain']} object, not plain data (a list, number, str...)"
    return f"gave {short(v)}"


def compare(check: Check, model: dict, learner: dict | None, hints: dict, said: dict | None = None) -> tuple[bool, str]:
    """(passed, message). Never shows the model's values: only what the learner's code did (with the message of an
    exception it raised, from `said`, which is never compared), and the hint."""
    said = said or {}
    if learner is None:
        return False, "no observations"
    for key, want in model.items():
        got = learner.get(key)
        hint = hints.get(key)
        tail = f": {hint}" if hint else ""
        if got is None:
            return False, f"{key}: the check never got there (it stopped earlier){tail}"
        tol = want.get("tol", check.tolerance) if isinstance(want, dict) else check.tolerance
        if not isinstance(got, dict) or not isinstance(want, dict):
            return False, f"{key}: unreadable observation"
        if "raised" in want or "raised" in got:
            if want.get("raised") == got.get("raised"):
                continue
            if got.get("raised") == "NotImplementedError":
                return False, f"not answered yet ({key}: your code raised NotImplementedError)"
            if "raised" in want:
                return False, f"{key}: your code {_record_text(got, said.get(key))}; it should raise an exception here{tail}"
            return False, f"{key}: your code {_record_text(got, said.get(key))}{tail}"
        if not same(want.get("value"), got.get("value"), float(tol or 0)):
            return False, f"{key}: your code {_record_text(got)}{tail}"
    return True, ""


def _clip(text: str, n: int = 300) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= n else text[: n - 3] + "..."


_THREADS = re.compile(r"^threads still running: (-?\d+) more than before the answer$")


def overcounted(learner: dict, model: dict) -> list[str]:
    """Keys the learner's run of a check sent more often than the model answer's run of it did.

    A check sends each key as often as its own code records it, which the answer cannot change (it can only make
    the check stop early, sending fewer); extra records were written into the pipe by something else."""
    return sorted(k for k, n in (learner or {}).items() if n > (model or {}).get(k, 0) and (model or {}).get(k, 0) > 0
                  or n > 1 and k not in (model or {}))


def unexpected_flags(learner: list[str], model: list[str]) -> list[str]:
    """The run-time review flags of a learner's check that the model answer's run of the same check did not raise.

    A check's own, trusted code may leave what the flags look for: torch.compile in a CUDA check starts
    compile worker threads, so the model answer's run ends with more threads too. A flag the model's run
    raised as well is the check's doing, not the learner's; more threads than the model's run left is
    still flagged.
    """
    def threads(flags: list[str]) -> int | None:
        for f in flags:
            m = _THREADS.match(f)
            if m:
                return int(m[1])
        return None

    allowed_threads = threads(model)
    out = []
    for f in learner:
        m = _THREADS.match(f)
        if m and allowed_threads is not None and int(m[1]) <= allowed_threads:
            continue
        if not m and f in model:
            continue
        out.append(f)
    return out


def exercise_mark(ex: Exercise, model: ExerciseRun, learner: ExerciseRun | None, *, available: set[str],
                  review: list[str], allowed: bool, answer_notes: list[str], missing: str = "",
                  missing_status: str = "missing") -> dict:
    """One exercise's mark: {points, max, open, status, message, checks, review}."""
    checks: dict[str, dict] = {}
    open_points = 0
    if missing_status == "not-handed-in":  # the notebook holding it was not handed in: nothing open, nothing earned
        for c in ex.checks:
            checks[c.id] = {"points": 0, "max": c.points, "status": missing_status, "message": missing, "hidden": c.hidden}
        return _mark(0, ex.max, 0, missing_status, missing, checks, [], answer_notes)
    for check in ex.checks:
        need = [n for n in check.needs if n not in available]
        if need:
            checks[check.id] = {"points": 0, "max": check.points, "status": "not-graded",
                                "message": f"not graded here: {', '.join(NEEDS[n] for n in need)}", "hidden": check.hidden}
            open_points += check.points
    graded = [c for c in ex.checks if c.id not in checks]
    total_max = ex.max
    if missing:
        for c in graded:
            checks[c.id] = {"points": 0, "max": c.points, "status": missing_status, "message": missing, "hidden": c.hidden}
        if open_points:
            missing += f"; {open_points} point(s) not graded here"
        return _mark(0, total_max, open_points, missing_status, missing, checks, [], answer_notes)
    assert learner is not None
    flags: list[str] = list(review)
    restored = list(dict.fromkeys(n for r in learner.checks.values() for n in r.restored))
    if restored:
        shown = ", ".join(f"{'Python' if n in BUILTIN_NAMES else 'the exercise'}'s own {n[:40]}"
                          for n in restored[:6])
        answer_notes = [*answer_notes, f"the checks used {shown}: your answer cell had rebound or changed "
                                       f"{'it' if len(restored) == 1 else 'them'} (leave given names and built-ins as "
                                       "they are)"]
    if learner.problem:
        for c in graded:
            checks[c.id] = {"points": 0, "max": c.points, "status": "error", "message": _clip(learner.problem),
                            "hidden": c.hidden}
        status = "timeout" if learner.problem == "budget" else "error"
        message = ("this learner's time budget ran out before this exercise" if learner.problem == "budget"
                   else f"the grader could not run this exercise: {learner.problem}")
        return _mark(0, total_max, open_points, status, message, checks, flags, answer_notes)
    answer = learner.answer
    points = 0
    answer_note = ""
    if answer is not None and answer.kind == "raised":
        if answer.ename == "NotImplementedError":
            answer_note = f"not answered yet (NotImplementedError: {_clip(answer.evalue, 120)})"
        else:
            answer_note = f"your answer cell raised {answer.ename}: {_clip(answer.evalue, 160)}"
    elif answer is not None and answer.kind == "timeout":
        answer_note = "your answer cell ran past its time limit (an endless loop?)"
    elif answer is not None and answer.kind == "dead":
        answer_note = "the kernel died while running your answer cell (os._exit, exit(), a crash or out of memory)"
    for c in graded:
        m = model.checks.get(c.id)
        r = learner.checks.get(c.id)
        if m is None or m.obs is None:
            checks[c.id] = {"points": 0, "max": c.points, "status": "error", "hidden": c.hidden,
                            "message": "the model answer did not pass this check on this machine: not graded (tell the course's authors)"}
            open_points += c.points
            continue
        if r is None:
            checks[c.id] = {"points": 0, "max": c.points, "status": "error", "message": "not run", "hidden": c.hidden}
            continue
        flags += [f"at run time: {f}" for f in unexpected_flags(r.flags, m.flags)]
        if r.kind == "timeout":
            status, msg = "timeout", (_clip(r.problem) if r.problem else "this check ran past its time limit with "
                                      "your answer (an endless loop?); the kernel was replaced")
        elif r.kind == "dead":
            status, msg = "error", (_clip(r.problem) if r.problem else
                                    "the kernel died during this check (os._exit, exit(), a crash, out of memory, or "
                                    "something your answer armed); the kernel was replaced for the next check")
        elif r.kind == "budget":
            status, msg = "timeout", "this learner's time budget ran out before this check"
        elif r.obs is None:
            status, msg = "error", _clip(r.problem or "no observations")
        else:
            learner_obs = dict(r.obs)
            for k in overcounted(r.obs_counts, m.obs_counts):  # someone besides the check wrote these keys
                learner_obs[k] = {"value": {"unplain": "recorded more often than the check records it"}}
                flags.append(f"at run time: tampering: the observation {short(k, 60)} came through the tripwire's "
                             "pipe more often than the check sends it")
            ok, why = compare(c, m.obs, learner_obs, m.hints, r.said)
            if ok:
                status, msg = "passed", "passed"
            elif r.kind == "raised":
                stopped = (f"the check stopped: {r.ename}: {_clip(r.evalue, 160)}" if r.ename != "NotImplementedError"
                           else "not answered yet (NotImplementedError)")
                status, msg = "error", f"{why}; {stopped}" if why and "not answered yet" not in why else (why or stopped)
            else:
                status, msg = "failed", why
            if status in ("error", "failed") and msg.startswith("not answered yet"):
                status = "not-answered"  # a stub the answer (or a part of it) still is: not an error of the learner's
        earned = c.points if status == "passed" else 0
        points += earned
        checks[c.id] = {"points": earned, "max": c.points, "status": status, "message": msg, "hidden": c.hidden}
    flags = list(dict.fromkeys(flags))
    graded_max = sum(c.points for c in graded if checks[c.id]["status"] != "error" or "model answer" not in checks[c.id]["message"])
    if flags and not allowed:
        would = points
        return _mark(0, total_max, open_points, "review",
                     f"needs review by an instructor (would earn {would}/{graded_max}): " + "; ".join(flags[:6]),
                     checks, flags, answer_notes, would=would)
    if not graded:
        status = "not-graded"
        message = f"not graded here: {checks[ex.checks[0].id]['message'][len('not graded here: '):]}" if ex.checks else "no checks"
    elif points == graded_max and graded_max > 0:
        status, message = "passed", f"all {len(graded)} check{'s' * (len(graded) != 1)} passed"
    elif points > 0:
        status = "partial"
        message = "; ".join(f"{c.name}: {checks[c.id]['message']}" for c in graded if checks[c.id]["status"] != "passed")
    else:
        kinds = {checks[c.id]["status"] for c in graded}
        status = "timeout" if "timeout" in kinds else "error" if ("error" in kinds and answer_note) else "failed"
        message = "; ".join(dict.fromkeys(checks[c.id]["message"] for c in graded if checks[c.id]["status"] != "passed"))
        if "not answered yet" in message or (answer_note.startswith("not answered yet")):
            status = "not-answered"  # the answer (or a part it calls) is still a stub: not answered, never "error"
            message = answer_note if answer_note.startswith("not answered yet") else \
                next(m for m in (checks[c.id]["message"] for c in graded) if "not answered yet" in m)
    if answer_note and not message.startswith(answer_note):
        message = f"{answer_note}; {message}"
    if open_points:
        message += f"; {open_points} point(s) not graded here ({', '.join(sorted({checks[c.id]['message'][len('not graded here: '):] for c in ex.checks if checks[c.id]['status'] == 'not-graded'}))})"
    if allowed and flags:
        message += "; cleared by an instructor: " + "; ".join(flags[:3])
    return _mark(points, total_max, open_points, status, message, checks, flags, answer_notes)


def _mark(points, max_points, open_points, status, message, checks, flags, notes, would=None) -> dict:
    message = _clip(message, 600)
    out = {"points": points, "max": max_points, "open": open_points, "status": status,
           "message": "; ".join([message, *notes]) if notes else message, "checks": checks}
    if flags:
        out["review"] = flags
    if would is not None:
        out["would_earn"] = would
    return out
