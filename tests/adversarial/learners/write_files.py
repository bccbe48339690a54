# attack: writes files wherever it can: the class folder, the grader's cwd, the course checkout, HOME, the report's folder
# honest: ex01_bucket_picker
# where: ex02_keep_outputs
import os
_targets = list(_adv_class_folders()) + _adv_roots() + [os.path.expanduser("~")]
for pid, argv in _adv_grader_cmdlines():
    try:
        _targets.append(os.readlink(f"/proc/{pid}/cwd"))
    except Exception:
        pass
    for i, a in enumerate(argv):
        if a in ("--report", "--csv", "--out") and i + 1 < len(argv):
            _targets.append(os.path.dirname(os.path.abspath(a and argv[i + 1])))
for folder in dict.fromkeys(_targets):
    try:
        with open(os.path.join(folder, f"adversary-{_ADV_RUN}.txt"), "w") as f:
            f.write("was here")
    except Exception:
        pass
