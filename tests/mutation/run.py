"""``make mutation MODULES=...``: mutation testing with mutmut 3 on a staged copy, one row per module.

``make faults`` plants the faults this project's authors thought of; mutmut plants the ones nobody did
(every comparison flipped, every constant nudged, every argument dropped), so it finds tests that cannot
fail. Per module (``policies/rl/replay.py``; globs such as ``policies/value/*`` expand) this script:

1. **stages** the code as installed, outside the checkout (``<state>/<module>-<key>/stage/robosteer/
   {policies,sim,real,scripts}`` plus ``configs/`` and ``tests/``), because mutmut names a mutant by its
   file path and the code runs as ``robosteer.*``; mutmut's ``mutants/`` folder lives there, never in the
   checkout;
2. runs the tests that **mirror** the module (``tests/policies/rl/`` for ``policies/rl/replay.py``; the
   table ``TESTS`` below where the names differ), without the tests that start a subprocess (CLI, Ray
   worker, twin: a mutant lives only in mutmut's forked worker, so a subprocess runs the unmutated code
   and such a test can only make a mutant look killed or survived by accident);
3. marks the mutants that only change **message text** (a string inside ``raise``, ``print``,
   ``warnings.warn`` or a logger call) as excluded before anything runs, and counts them;
4. runs ``mutmut run`` with its **forkserver** isolation (torch is not fork-safe) and one worker by
   default (``--workers``);
5. appends the module's row to ``docs/results/mutation.jsonl``: counts, score = killed ÷ (generated −
   listed equivalents) where "generated" excludes the message-text mutants, the survivors with their
   diffs, the functions mutmut did not mutate and why, and the command.

Resuming: the per-mutant verdicts live in mutmut's meta files under ``<state>`` (``~/.cache/robosteer/
mutation`` unless ``--state``), written after every mutant, so a run killed with ``kill -9`` continues
where it stopped when started again. A module whose source and tests hash (sha256) already have a row is
skipped. ``kill -STOP <pid>`` on this script pauses mutmut's processes too (a watcher forwards it), and a
mutant timed out across such a pause is run again.

Equivalent mutants (no test can kill them: behaviour is identical) are listed, with their diff and why, in
``tests/mutation/equivalents.py``; ``--docs`` rewrites ``docs/experiments/mutation.md`` from the rows and that list.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime as dt
import fcntl
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ROWS = ROOT / "docs" / "results" / "mutation.jsonl"
DOCS = ROOT / "docs" / "experiments" / "mutation.md"  # rows name their commits: a study page
SUBPACKAGES = ("policies", "sim", "real", "scripts")  # as robosteer/__init__.py
DEFAULT_STATE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "robosteer" / "mutation"

# Where a module's mirrored tests are not named after it (tests/<dir>/test_<stem>*.py), the tests that
# exercise it, chosen by reading them (paths relative to the repository root).
TESTS: dict[str, list[str]] = {
    "policies/rl/replay.py": ["tests/policies/rl"],
    # test_actor.py / test_nets.py pin what mutation found; the blocks' and targets' tests cover them too.
    "policies/rl/actor.py": ["tests/policies/rl"],
    "policies/rl/nets.py": ["tests/policies/rl"],
    "policies/rl/temperature.py": ["tests/policies/rl"],
    # NormalizedCritic (in critic.py) is the offline critic: the value tests exercise it too.
    "policies/rl/critic.py": ["tests/policies/rl", "tests/policies/value/test_critic.py"],
    "policies/acting.py": [
        "tests/policies/test_acting.py",
        "tests/test_composition.py",
        "tests/policies/test_diffusion_policy.py",
        "tests/policies/test_streaming_policy.py",
    ],
    "sim/chunking.py": ["tests/sim/test_sim_chunking.py", "tests/sim/test_sim_chunking_properties.py"],
    "sim/history.py": ["tests/sim/test_sim_history.py"],
    "sim/evaluate.py": ["tests/sim/test_sim_evaluate.py"],
    "policies/data/stats.py": [  # its own by-hand tests, and the datasets' and normalizer's fits
        "tests/policies/data/test_stats.py",
        "tests/policies/data/test_sequence_dataset.py",
        "tests/policies/data/test_hdf5_dataset.py",
        "tests/policies/test_normalizer.py",
    ],
    "policies/data/sequence.py": [
        "tests/policies/data/test_sequence_dataset.py",
        "tests/policies/data/test_sequence_properties.py",
    ],
    "policies/value/iql.py": ["tests/policies/value"],
    "policies/value/calql.py": ["tests/policies/value"],
    # train_value / load_critic / embedded_critic run from robosteer-value's command: its tests drive them.
    "policies/value/learner.py": ["tests/policies/value", "tests/scripts/test_value.py"],
    "policies/value/__init__.py": ["tests/policies/value"],
}

# Issue 59's tier A (every survivor answered), as files; dsrl.py/expo.py's loss, target and selection
# functions belong to it too (they need a function filter this script does not have yet).
TIER_A = [
    *(f"policies/rl/{m}.py" for m in ("actor", "critic", "nets", "offline", "replay", "temperature")),
    *(f"policies/value/{m}.py" for m in ("calql", "iql", "learner")),
    "policies/normalizer.py",
    "policies/acting.py",
    "policies/data/sequence.py",
    "policies/data/stats.py",
    "policies/steering/vgps.py",
    "real/safety.py",
    "sim/evaluate.py",
    "sim/chunking.py",
    "sim/history.py",
]

# A test function whose source holds one of these starts another process (or needs one that does).
SUBPROCESS_MARKS = (
    "subprocess",
    "sys.executable",
    "Popen",
    "pixel_base_run",
    "ENV",
    "ray.",
    "multiprocessing",
)

# Calls whose string arguments are message text: a mutant changing only those is excluded (and counted).
MESSAGE_CALLS = {
    "print",
    "warn",
    "debug",
    "info",
    "warning",
    "error",
    "exception",
    "critical",
    "log",
    "write",
}

# mutmut's exit codes (mutmut/stats.py) grouped into the row's columns.
KILLED, SURVIVED, NO_TESTS, TIMEOUT = {1, 3}, {0}, {5, 33}, {-24, 24, 152, 255, 36}
SKIPPED = 34  # what a message-text mutant is marked with before the run


# ----------------------------------------------------------------------------------------------- selection
def expand_modules(patterns: list[str]) -> list[str]:
    """Module paths (relative, ``policies/rl/replay.py``) for the given paths and globs, in order given."""
    out: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(str(ROOT / pattern))) if any(c in pattern for c in "*?[") else []
        paths = [Path(m) for m in matches] or [ROOT / pattern]
        for path in paths:
            rel = path.resolve().relative_to(ROOT).as_posix()
            if not rel.endswith(".py") or not path.is_file():
                raise SystemExit(f"mutation: {pattern!r} is not a Python file of the repository")
            if rel.split("/")[0] not in SUBPACKAGES:
                raise SystemExit(f"mutation: {rel} is outside {', '.join(SUBPACKAGES)}")
            if path.name == "__init__.py" and not has_functions(path.read_text()):
                continue  # a package's re-exports: nothing mutmut can mutate
            if rel not in out:
                out.append(rel)
    return out


def has_functions(source: str) -> bool:
    """Whether the source defines any function (mutmut mutates only function bodies)."""
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(ast.parse(source)))


def tests_for(module: str) -> list[str]:
    """The tests that mirror ``module``: the table's, else ``tests/<dir>/test_<stem>*.py``, else ``tests/<dir>/``."""
    if module in TESTS:
        return TESTS[module]
    folder, stem = Path(module).parent, Path(module).stem
    named = sorted((ROOT / "tests" / folder).glob(f"test_*{stem}*.py"))
    if named:
        return [p.relative_to(ROOT).as_posix() for p in named]
    return [f"tests/{folder.as_posix()}"]


def test_files(selection: list[str]) -> list[Path]:
    """Every test file a selection names (folders expanded), plus the conftest files above them."""
    files: set[Path] = set()
    for sel in selection:
        path = ROOT / sel
        found = sorted(path.rglob("test_*.py")) if path.is_dir() else [path]
        for f in found:
            files.add(f)
            for parent in f.parents:
                if parent == ROOT:
                    break
                if (parent / "conftest.py").is_file():
                    files.add(parent / "conftest.py")
    return sorted(files)


def subprocess_tests(files: list[Path]) -> list[str]:
    """Node ids (``tests/...py::test_x``, ``::Class::test_x``) of the tests that start another process."""
    out = []
    for f in files:
        if not f.name.startswith("test_"):
            continue
        source = f.read_text()
        tree = ast.parse(source)
        rel = f.relative_to(ROOT).as_posix()
        scopes: list[tuple[str, ast.AST]] = [("", tree)]
        while scopes:
            prefix, scope = scopes.pop()
            for node in getattr(scope, "body", []):
                if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                    scopes.append((f"{prefix}{node.name}::", node))
                elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                    text = ast.get_source_segment(source, node) or ""
                    if any(mark in text for mark in SUBPROCESS_MARKS):
                        out.append(f"{rel}::{prefix}{node.name}")
    return sorted(out)


def sha256(*paths: Path) -> str:
    """One sha256 over the files' contents (and names), in the order given."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def not_mutated(source: str) -> list[dict[str, str]]:
    """The functions mutmut 3 leaves alone in ``source`` and why (decorators, pragmas, reserved names)."""
    out = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                decorators = [ast.unparse(d) for d in node.decorator_list]
                name = f"{prefix}{node.name}"
                if decorators and decorators not in (["staticmethod"], ["classmethod"]):
                    why = "decorated " + " ".join(f"@{d}" for d in decorators)
                    out.append({"function": name, "why": why + " (mutmut 3 skips decorated functions)"})
                elif node.name in ("__getattribute__", "__setattr__", "__new__"):
                    out.append(
                        {"function": name, "why": "a name mutmut never mutates (its trampoline needs it)"}
                    )

    visit(ast.parse(source).body, "")
    for i, line in enumerate(source.splitlines(), 1):
        if "pragma: no mutate" in line:
            out.append({"function": f"line {i}", "why": f"pragma: no mutate: {line.strip()}"})
    return out


# ------------------------------------------------------------------------------------------------- staging
def stage_tree(dest: Path, module: str, tests: list[str], deselect: list[str]) -> None:
    """Lay the checkout out as installed under ``dest`` with a pyproject.toml holding mutmut's settings."""
    tmp = dest.with_name(dest.name + ".part")
    if tmp.exists():
        shutil.rmtree(tmp)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")
    (tmp / "robosteer").mkdir(parents=True)
    shutil.copy2(ROOT / "robosteer" / "__init__.py", tmp / "robosteer" / "__init__.py")
    for top in SUBPACKAGES:
        shutil.copytree(ROOT / top, tmp / "robosteer" / top, ignore=ignore)
    # robosteer.scripts.common finds configs/ beside the package's parent: robosteer/configs when installed.
    shutil.copytree(ROOT / "configs", tmp / "robosteer" / "configs", ignore=ignore)
    shutil.copytree(ROOT / "configs", tmp / "configs", ignore=ignore)
    shutil.copytree(ROOT / "tests", tmp / "tests", ignore=ignore)
    settings = {
        "source_paths": ["robosteer"],
        "only_mutate": [f"robosteer/{module}"],
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", *(f"--deselect={d}" for d in deselect)],
        "also_copy": ["configs"],
        "process_isolation": "forkserver",  # torch is not fork-safe: workers fork from a pytest-free server
        "use_git_change_detection": False,  # the stage is not a git checkout
    }
    lines = [
        "",
        "[tool.mutmut]",
        *(f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in settings.items()),
    ]
    (tmp / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text() + "\n".join(lines) + "\n")
    tmp.rename(dest)


# ------------------------------------------------------------------ helpers run inside the stage (mutmut)
def message_only(orig: ast.FunctionDef, mutant: ast.FunctionDef) -> bool:
    """Whether two versions of a function differ only in the text of messages (raise/print/warn/log)."""

    class Blank(ast.NodeTransformer):
        def _blank(self, call: ast.AST) -> ast.AST:
            if isinstance(call, ast.Call):
                keep = [a for a in call.args if not _is_text(a)]
                call.args = keep
                call.keywords = [k for k in call.keywords if not _is_text(k.value)]
            return call

        def visit_Raise(self, node: ast.Raise) -> ast.AST:
            if node.exc is not None:
                node.exc = self._blank(node.exc)  # type: ignore[assignment]
            return self.generic_visit(node)

        def visit_Call(self, node: ast.Call) -> ast.AST:
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in MESSAGE_CALLS:
                self._blank(node)
            return self.generic_visit(node)

    def body(fn: ast.FunctionDef) -> str:
        fn = Blank().visit(ast.parse(ast.unparse(fn)).body[0])
        return ast.dump(ast.Module(body=fn.body, type_ignores=[])) + ast.dump(fn.args)

    return body(orig) == body(mutant)


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str))
    )


def _stage_mutants() -> list[tuple[Any, str]]:
    """(mutation data, mutant name) of every mutant in the stage (cwd)."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.utils.file_utils import walk_mutatable_files

    out = []
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        out += [(data, name) for name in data.exit_code_by_key]
    return out


def _functions(name: str) -> tuple[ast.FunctionDef, ast.FunctionDef]:
    """The original and the mutated function of one mutant, as ast (through mutmut's own reader)."""
    import libcst as cst
    from mutmut.mutation.diff_apply import (
        find_mutant,
        read_functions_from_index,
        read_mutant_function,
        read_mutants_module,
        read_original_function,
    )

    path = find_mutant(name).path
    functions = read_functions_from_index(name, path)
    if functions is None:
        module = read_mutants_module(path)
        functions = (read_original_function(module, name), read_mutant_function(module, name))
    a, b = (ast.parse(cst.Module([f]).code.strip()).body[0] for f in functions)
    assert isinstance(a, ast.FunctionDef | ast.AsyncFunctionDef) and isinstance(b, type(a))
    return a, b  # type: ignore[return-value]


def prepare_in_stage() -> dict[str, Any]:
    """Generate the mutants (as ``mutmut run`` would) and mark the message-text ones as skipped."""
    from mutmut.__main__ import (
        copy_also_copy_files,
        copy_src_dir,
        create_mutants,
        setup_source_paths,
        store_lines_covered_by_tests,
    )

    Path("mutants").mkdir(exist_ok=True)
    copy_src_dir()
    copy_also_copy_files()
    setup_source_paths()
    store_lines_covered_by_tests()
    create_mutants(1)
    messages = []
    for data, name in _stage_mutants():
        if message_only(*_functions(name)):
            messages.append(name)
            if data.exit_code_by_key[name] is None:
                data.exit_code_by_key[name] = SKIPPED
                data.save()
    return {"message_mutants": sorted(messages)}


def collect_in_stage() -> dict[str, Any]:
    """Every mutant's exit code and the diff of each that was not killed, from mutmut's meta files."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    codes, diffs = {}, {}
    for data, name in _stage_mutants():
        code = data.exit_code_by_key[name]
        codes[name] = code
        if code not in KILLED and code != SKIPPED:
            diffs[name] = get_diff_for_mutant(name, path=data.path)
    return {"codes": codes, "diffs": diffs}


# ---------------------------------------------------------------------------------------- running mutmut
def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def start_pause_watcher(pauses: Path) -> int:
    """Fork a watcher that forwards ``kill -STOP``/``-CONT`` of this process to all of its descendants.

    ``kill -STOP <pid>`` stops only that process; mutmut's workers would carry on using the CPU that a
    timed measurement needs. The watcher sees this process stopped (state T in /proc), stops every
    descendant, and continues them when this process continues; each pause is appended to ``pauses``.
    """
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopped: list[int] = []
    me = os.getpid()
    try:
        while process_state(parent) not in ("X", "Z"):
            state = process_state(parent)
            if state == "T" and not stopped:
                stopped = [p for p in descendants(parent) if p != me]
                for p in stopped:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p, signal.SIGSTOP)
                with pauses.open("a") as f:
                    f.write(f"{time.time():.0f} stopped\n")
            elif state != "T" and stopped:
                for p in stopped:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p, signal.SIGCONT)
                stopped = []
            time.sleep(0.2)
    finally:
        os._exit(0)


def in_stage(stage: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """Run a python command in the stage, this script's helpers included (``--_helper``)."""
    return subprocess.run([sys.executable, *args], cwd=stage, env=env, capture_output=True, text=True)


def helper(stage: Path, env: dict[str, str], name: str, arg: str = "") -> dict[str, Any]:
    proc = in_stage(stage, env, str(Path(__file__).resolve()), f"--_helper={name}", f"--_arg={arg}")
    if proc.returncode != 0:
        raise RuntimeError(f"mutation helper {name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_mutmut(stage: Path, env: dict[str, str], workers: int, names: list[str], log: Path) -> int:
    """``mutmut run`` in the stage; its output goes to ``log``. Dies with this process (PDEATHSIG)."""
    mutmut = Path(sys.executable).with_name("mutmut")
    cmd = [str(mutmut), "run", f"--max-children={workers}", *names]

    def die_with_parent() -> None:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a kill -9 here ends mutmut too

    with log.open("a") as out:
        out.write(f"\n$ {shlex.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd, cwd=stage, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
        return proc.wait()


# ------------------------------------------------------------------------------------------------ the rows
def load_rows() -> list[dict[str, Any]]:
    if not ROWS.exists():
        return []
    return [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]


def load_equivalents() -> list[dict[str, str]]:
    spec = importlib.util.spec_from_file_location(
        "mutation_equivalents", Path(__file__).with_name("equivalents.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.EQUIVALENTS)


def diff_body(diff: str) -> str:
    """A mutant's diff without its file header and hunk line numbers (stable across renumbering)."""
    keep = [ln.rstrip() for ln in diff.splitlines() if not ln.startswith(("---", "+++", "@@"))]
    return "\n".join(ln for ln in keep if ln[:1] in "+-").strip()


def git_commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.strip()


def build_row(module: str, info: dict[str, Any], result: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The module's row: counts, score, survivors with diffs, equivalents, not-mutated functions."""
    codes: dict[str, int | None] = result["codes"]
    messages = set(info["message_mutants"])
    listed = {diff_body(e["diff"]): e for e in load_equivalents() if e["module"] == module}
    counts = dict.fromkeys(("killed", "survived", "no_tests", "timeout", "equivalent", "other"), 0)
    survivors, equivalents = [], []
    for name, code in sorted(codes.items()):
        if name in messages:
            continue
        short = name.rsplit(".", 1)[-1]
        if code in KILLED:
            counts["killed"] += 1
            continue
        diff = result["diffs"].get(name, "")
        if diff_body(diff) in listed and code in SURVIVED | NO_TESTS:
            counts["equivalent"] += 1
            equivalents.append(short)
            continue
        key = (
            "survived"
            if code in SURVIVED
            else "no_tests"
            if code in NO_TESTS
            else "timeout"
            if code in TIMEOUT
            else "other"
        )
        counts[key] += 1
        survivors.append({"mutant": short, "status": key, "diff": diff})
    generated = len(codes) - len(messages)
    denominator = generated - counts["equivalent"]
    load1, load5, load15 = os.getloadavg()
    return {
        "module": module,
        "commit": info["commit"],  # taken when the module started: commits may land while it runs
        "dirty": info["dirty"],
        "source_sha256": info["source_sha256"],
        "tests_sha256": info["tests_sha256"],
        "tests": info["tests"],
        "deselected": info["deselected"],
        **counts,
        "message_excluded": len(messages),
        "generated": generated,
        "score": round(counts["killed"] / denominator, 4) if denominator else None,
        "survivors": survivors,
        "equivalents": equivalents,
        "not_mutated": info["not_mutated"],
        "seconds": round(seconds, 1),  # this invocation's (a resumed run counts only its own part)
        "resumed": info["resumed"],
        "workers": info["workers"],
        "loadavg": [round(load1, 2), round(load5, 2), round(load15, 2)],
        "mutmut": importlib.metadata.version("mutmut"),
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": info["command"],
    }


def commit_rows(module: str, row: dict[str, Any]) -> None:
    """Commit the rows file alone (another engineer's work may be uncommitted in the same tree)."""
    rel = ROWS.relative_to(ROOT).as_posix()
    msg = f"mutation: {module} scores {row['score']} ({row['killed']} of {row['generated']} killed)"
    for _ in range(10):
        subprocess.run(["git", "add", rel], cwd=ROOT, capture_output=True)
        proc = subprocess.run(
            ["git", "commit", "-q", "-m", msg, "--", rel], cwd=ROOT, capture_output=True, text=True
        )
        if proc.returncode == 0 or "index.lock" not in proc.stderr:
            return
        time.sleep(3)


# ------------------------------------------------------------------------------------------- one module
def run_module(module: str, args: argparse.Namespace, command: str) -> dict[str, Any] | None:
    """Mutate one module to the end (resuming a stopped run); append and return its row, None if skipped."""
    tests = tests_for(module)
    files = test_files(tests)
    source = ROOT / module
    info: dict[str, Any] = {
        "source_sha256": sha256(source),
        "tests_sha256": sha256(*files),
        "tests": tests,
        "deselected": subprocess_tests(files),
        "not_mutated": not_mutated(source.read_text()),
        "workers": args.workers,
        "command": command,
        "commit": git_commit(),
        "dirty": subprocess.run(["git", "diff", "--quiet", "HEAD", "--", module], cwd=ROOT).returncode != 0,
    }
    done = [
        r
        for r in load_rows()
        if r["module"] == module
        and (r["source_sha256"], r.get("tests_sha256")) == (info["source_sha256"], info["tests_sha256"])
    ]
    if done and not args.force:
        print(
            f"{module}: a row for this source and these tests exists (score {done[-1]['score']}); skipped",
            flush=True,
        )
        return None
    work = (
        args.state / f"{module.replace('/', '__')}-{info['source_sha256'][:10]}-{info['tests_sha256'][:10]}"
    )
    work.mkdir(parents=True, exist_ok=True)
    lock = (work / "lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"mutation: {work} is in use by another run") from None
    stage = work / "stage"
    if args.force and stage.exists() and not (work / "prepared.json").exists():
        shutil.rmtree(stage)
    resumed = stage.exists()
    if not resumed:
        stage_tree(stage, module, tests, info["deselected"])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MUJOCO_GL": "egl"}
    env.pop(
        "PYTHONPATH", None
    )  # the stage's mutants/ folder, which mutmut puts first, is the code under test
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    log = work / "mutmut.log"
    print(
        f"{module}: {len(files)} test files, {len(info['deselected'])} subprocess tests deselected; log {log}",
        flush=True,
    )
    start = time.perf_counter()
    prepared = work / "prepared.json"
    if not prepared.exists():
        prepared.write_text(json.dumps(helper(stage, env, "prepare")))
    info.update(json.loads(prepared.read_text()))
    pauses = args.state / "pauses.log"  # the watcher's (start_pause_watcher)
    paused_before = pauses.stat().st_size if pauses.exists() else 0
    rc = run_mutmut(stage, env, args.workers, [], log)
    if rc != 0:
        raise RuntimeError(f"mutmut exited {rc}; see {log}")
    result = helper(stage, env, "collect")
    timed_out = [n for n, c in result["codes"].items() if c in TIMEOUT]
    if timed_out and pauses.exists() and pauses.stat().st_size > paused_before:
        # A pause (kill -STOP) outlasts mutmut's wall-clock limit: such a mutant gets a second run.
        run_mutmut(stage, env, args.workers, timed_out, log)
        result = helper(stage, env, "collect")
    elapsed = time.perf_counter() - start
    info["resumed"] = resumed
    row = build_row(module, info, result, elapsed)
    ROWS.parent.mkdir(parents=True, exist_ok=True)
    with ROWS.open("a") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(
        f"{module}: score {row['score']} — killed {row['killed']}, survived {row['survived']}, no tests "
        f"{row['no_tests']}, timeout {row['timeout']}, equivalent {row['equivalent']} of {row['generated']} "
        f"(+{row['message_excluded']} message-only excluded) in {elapsed:.0f} s",
        flush=True,
    )
    if args.commit:
        commit_rows(module, row)
    return row


# ----------------------------------------------------------------------------------------------- the docs
def write_docs() -> None:
    """``docs/experiments/mutation.md``: the command, the latest score per module, the equivalents, what is not mutated."""
    latest: dict[str, dict[str, Any]] = {}
    for row in load_rows():
        latest[row["module"]] = row
    lines = [
        "# Mutation testing",
        "",
        '`make mutation MODULES="policies/rl/replay.py sim/chunking.py"` runs [mutmut](https://mutmut.readthedocs.io)',
        "3 on a staged copy of the code laid out as installed (`tests/mutation/run.py` says how, and why), with",
        "the tests that mirror each module, and appends one row per module to",
        "[`docs/results/mutation.jsonl`](../results/mutation.jsonl). Score = killed ÷ (generated − listed",
        "equivalents); mutants that change only message text (`raise`, `print`, warnings, logs) are excluded",
        "and counted; no-tests and timeouts count as not killed. Generated by `tests/mutation/run.py --docs`.",
        "",
        "## Running and resuming",
        "",
        '- `make mutation MODULES="policies/rl/* sim/chunking.py"` (or `python tests/mutation/run.py --commit',
        '  ...` to commit each row as it lands); `MUTATION_ARGS="--workers 2"` for more workers. On a shared',
        "  machine: `nice -n 19`, one worker.",
        "- Stopped (`kill -9` included): run the same command again. The per-mutant verdicts live under",
        "  `~/.cache/robosteer/mutation/<module>-<source hash>-<tests hash>/`; mutmut continues where it stopped.",
        "- A module whose source and tests hashes already have a row is skipped; `--force` re-runs it. A changed",
        "  test file under the module's tests makes a new row (the column *tests current* below says whether",
        "  the latest row ran against today's tests: a row marked *no* predates tests added for its survivors).",
        "- `kill -STOP <pid>` pauses a run (its mutmut processes too) for a timed measurement; `kill -CONT`",
        "  resumes; a mutant timed out across the pause is run again.",
        "",
        "## Scope and exclusions",
        "",
        "- Tests that start another process (CLI, Ray worker, twin) are deselected: a mutant lives only in",
        "  mutmut's worker, so such a test runs unmutated code.",
        "- Mutants changing only message text are excluded and counted (column *message-only*).",
        "- Equivalents marked *CPU-only host* change only which device a tensor is on; no GPU runs these",
        "  rows, so they are listed rather than killed (a CUDA run could tell them apart).",
        "- A *timeout* can be a mutant that breaks an import rather than one that hangs: `temperature.py`'s",
        "  two `check_lr` mutants (`lr <= 0`, `lr < 1`) raise while `robosteer.scripts.schemas` builds DSRL's",
        "  defaults (temperature_lr=0); run by hand, `pytest tests/policies/rl/test_temperature.py` fails at once.",
        "- Tier A without a row yet: "
        + (", ".join(f"`{m}`" for m in TIER_A if m not in latest) or "none")
        + ". `policies/steering/{dsrl,expo,loop}.py` (tier A's loss, target and selection functions, tier B's",
        "  loop) wait for a function filter and for the loop's rewrite: a row keyed to code about to change is stale.",
        "",
        "| module | score | killed | survived | no tests | timeout | equivalent | generated | message-only | s | commit "
        "| tests current |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for module, r in latest.items():
        files = test_files(tests_for(module))
        current = "yes" if r.get("tests_sha256") == sha256(*files) else "no"
        lines.append(
            f"| `{module}` | {r['score']} | {r['killed']} | {r['survived']} | {r['no_tests']} | {r['timeout']} | "
            f"{r['equivalent']} | {r['generated']} | {r['message_excluded']} | {r['seconds']:.0f} | {r['commit'][:8]} "
            f"| {current} |"
        )
    lines += [
        "",
        "## Equivalent mutants",
        "",
        "No test can kill these: the mutated code behaves identically.",
        "",
    ]
    for e in load_equivalents():
        lines += [
            f"- `{e['module']}` — {e['why']}",
            "",
            "  ```diff",
            *(f"  {ln}" for ln in diff_body(e["diff"]).splitlines()),
            "  ```",
            "",
        ]
    lines += ["## Not mutated", ""]
    skipped = [(m, n) for m, r in latest.items() for n in r["not_mutated"]]
    lines += [f"- `{m}` `{n['function']}`: {n['why']}" for m, n in skipped] or [
        "Nothing in the modules above."
    ]
    lines += [
        "",
        "mutmut mutates function bodies only: module-level constants and class attributes are not mutated.",
        "",
    ]
    DOCS.write_text("\n".join(lines))
    print(f"wrote {DOCS.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "modules", nargs="*", help="module paths or globs, e.g. policies/rl/replay.py 'policies/value/*'"
    )
    parser.add_argument("--workers", type=int, default=1, help="mutmut workers (default 1)")
    parser.add_argument(
        "--state",
        type=Path,
        default=DEFAULT_STATE,
        help=f"where stages and verdicts live (default {DEFAULT_STATE})",
    )
    parser.add_argument("--force", action="store_true", help="run a module even when its row exists")
    parser.add_argument("--commit", action="store_true", help="git-commit the rows file after each module")
    parser.add_argument(
        "--docs", action="store_true", help="rewrite docs/experiments/mutation.md from the rows"
    )
    parser.add_argument("--_helper", default="", help=argparse.SUPPRESS)
    parser.add_argument("--_arg", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._helper:  # inside a stage: print the helper's result as the last line
        fn = {"prepare": prepare_in_stage, "collect": collect_in_stage}[args._helper]
        result = fn()
        print(json.dumps(result, ensure_ascii=False))
        return 0
    if not args.modules and not args.docs:
        parser.error("name the modules to mutate (MODULES=policies/rl/replay.py), or --docs")
    modules = expand_modules(args.modules)
    command = shlex.join(["python", "tests/mutation/run.py", *args.modules])
    start_pause_watcher(args.state / "pauses.log") if modules else None
    failed = 0
    for module in modules:
        args.state.mkdir(parents=True, exist_ok=True)
        try:
            run_module(module, args, command)
        except RuntimeError as e:
            print(f"{module}: {e}", flush=True)
            failed += 1
    if args.docs:
        write_docs()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
