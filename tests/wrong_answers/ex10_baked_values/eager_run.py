# misconception: run the step eagerly with the current temperature: no graph, no baked value
# source: plausible; right values, none of the graph's benefit
# targets: captures_once
def make_tempered_step(dev, example):
    temp = {"t": 1.0}

    def run(x):
        t = temp["t"]
        return launch(lambda v: [a / t for a in v], dev.tensor(x)).tolist()

    def set_temperature(t):
        temp["t"] = t

    return run, set_temperature
