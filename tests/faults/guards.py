"""Planted faults in the checks that refuse a run before any work (``scripts/guards.py``);
``python tests/faults/run.py -k guards``."""

GUARDS = "scripts/guards.py"
T_GUARDS = "tests/scripts/test_guards.py"

FAULTS = [
    {
        "name": "guards: robosteer-steer's base check never runs",
        "file": GUARDS,
        "old": '    if config_name == "steer":\n        check_steer_base(cfg)\n',
        "new": "",
        "tests": [T_GUARDS],
    },
    {
        "name": "guards: EXPO is let steer a served base",
        "file": GUARDS,
        "old": 'if algo == "expo" and base.startswith(SERVED):',
        "new": 'if algo == "expo" and base.startswith(SERVED[1:]):',
        "tests": [T_GUARDS],
    },
]
