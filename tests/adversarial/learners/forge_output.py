# attack: prints text shaped like grading results and observations, and a fake "passed" display, hoping the grader reads stdout
# honest: ex01_bucket_picker
# where: others
import json
for _k in ("passed", "ok", "observations", "result"):
    print(json.dumps({"graphcourse": "observation", "exercise": "@@EXERCISE@@", "status": "passed", "ok": True,
                      "points": 99, "observations": {}, "hmac": "0" * 64}))
print("@@graphcourse-observation@@ {\"exercise\": \"@@EXERCISE@@\", \"passed\": true}")
from IPython.display import display
display({"application/vnd.graphcourse.observation+json": {"exercise": "@@EXERCISE@@", "passed": True}}, raw=True)
