# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch's own distributed test suite against ccl's backend ("cclz"), with gloo beside it.

Runs `DistributedTest._DistTestBase` (torch.testing._internal.distributed.distributed_test, the
tests PyTorch runs on every backend through test/distributed/test_distributed_spawn.py) at
world size 2 (--world-size), as a new user would: the suite's feature tables list cclz wherever they list gloo,
and its table of backends registered from outside PyTorch ("plugin") lists cclz; nothing else
is changed. Ranks are forked processes (the spawn runner re-imports torch in every
rank of every test: the same tests, ten times the time). Each configuration (backend, and
TORCH_DISTRIBUTED_DEBUG unset or DETAIL, whose wrapper checks every collective across ranks)
runs in a process of its own, since the suite reads BACKEND when it is imported.

  run.py                     every configuration; prints the table, exits 1 when a cclz test
                             fails that known_failures.txt does not list, or a listed one passes
  run.py --backends cclz     cclz only (--debug OFF / DETAIL / both)
  run.py --gloo-debug OFF    gloo without DETAIL only (what CI runs: gloo is the comparison,
                             not the check)
  run.py -k all_gather       only tests whose names contain the text
  run.py --json FILE         every test's outcome per configuration, for the README's table
  run.py --world-size 3      ranks per test (default 2, what CI runs; at 3 and 4 only the
                             known failures fail, as at 2)

known_failures.txt (beside this file) is the one list of the suite's tests that do not pass on
cclz, each with its reason; a test listed there still runs and is reported.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KNOWN = os.path.join(HERE, "known_failures.txt")
WORLD_SIZE = 2  # CI's; --world-size sets another


def read_known(path=KNOWN):
    """{test name: reason} from known_failures.txt: `name  reason` per line, # comments."""
    known = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
            if not line:
                continue
            name, _, reason = line.partition(" ")
            if not reason.strip():
                raise SystemExit(f"{path}: {name} has no reason")
            known[name] = reason.strip()
    return known


def run_one(backend, debug, pattern, out, world_size):
    """In a process of its own: import the suite for `backend`, run it, write outcomes."""
    os.environ["BACKEND"] = backend
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="ccl-torch-suite-")
    if debug != "OFF":
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = debug
    import unittest

    import ccl.torch._build
    import torch.multiprocessing as mp

    ccl.torch._build.load()  # compiled (or taken from torch's cache) once, before the ranks fork
    from torch.testing._internal.common_distributed import DistTestCases

    for backends in DistTestCases.backend_feature.values():
        if "gloo" in backends:
            backends.add(backend)
    if backend != "gloo":
        # The table the suite keeps for backends registered from outside PyTorch: without it
        # the suite counts a third-party backend as "not available".
        DistTestCases.backend_feature["plugin"].add(backend)
    for backends in DistTestCases.skip_collective.values():
        if "gloo" in backends:
            backends.add(backend)
    from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend

    class TestDistBackendWithFork(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._start_processes(mp.get_context("fork").Process)

    class Outcomes(unittest.TextTestResult):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.outcomes = {}

        def _name(self, test):
            return test.id().rsplit(".", 1)[-1]

        def addSuccess(self, test):
            super().addSuccess(test)
            self.outcomes[self._name(test)] = ["passed", ""]

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self.outcomes[self._name(test)] = ["skipped", str(reason)]

        def _fail(self, test, err):
            text = self._exc_info_to_string(err, test).strip().splitlines()
            # The rank's own exception, not the parent's "Process 0 exited with ..." wrapper.
            last = [ln for ln in text if ln and not ln.startswith(" ") and "Error" in ln]
            self.outcomes[self._name(test)] = ["failed", (last[-1] if last else text[-1])[:300]]

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._fail(test, err)

        def addError(self, test, err):
            super().addError(test, err)
            self._fail(test, err)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self.outcomes[self._name(test)] = ["skipped", "expected failure in PyTorch's suite"]

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self.outcomes[self._name(test)] = ["passed", "unexpected success in PyTorch's suite"]

    names = unittest.TestLoader().getTestCaseNames(TestDistBackendWithFork)
    names = [n for n in names if not pattern or pattern in n]
    suite = unittest.TestSuite(TestDistBackendWithFork(n) for n in names)
    start = time.time()
    with open(os.devnull, "w") as quiet:
        result = unittest.TextTestRunner(stream=quiet, resultclass=Outcomes, verbosity=0).run(suite)
    with open(out, "w") as f:
        json.dump({"seconds": time.time() - start, "outcomes": result.outcomes}, f)


def run_config(backend, debug, pattern, timeout, world_size):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        path = tmp.name
    cmd = [sys.executable, os.path.abspath(__file__), "--one", backend, "--debug", debug, "--out", path,
           "--world-size", str(world_size)]
    if pattern:
        cmd += ["-k", pattern]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    log = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        sys.stderr.write(log.stdout[-5000:] + log.stderr[-5000:])
        raise SystemExit(f"the suite did not finish for {backend} (debug {debug}): exit {log.returncode}")
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return data


def summarize(outcomes):
    counts = {"ran": len(outcomes), "passed": 0, "failed": 0, "skipped": 0}
    for status, _ in outcomes.values():
        counts[status] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="cclz,gloo")
    ap.add_argument("--debug", default="both", choices=["OFF", "DETAIL", "both"])
    ap.add_argument("--gloo-debug", default="same", choices=["same", "OFF", "DETAIL"],
                    help="gloo's debug levels: those of --debug, or one")
    ap.add_argument("-k", dest="pattern", default="")
    ap.add_argument("--json")
    ap.add_argument("--world-size", type=int, default=WORLD_SIZE, help="ranks per test")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per configuration")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        run_one(a.one, a.debug, a.pattern, a.out, a.world_size)
        return 0

    if a.world_size < 2:
        ap.error("--world-size must be 2 or more")
    known = read_known()
    debugs = ["OFF", "DETAIL"] if a.debug == "both" else [a.debug]
    results = {}
    for debug in debugs:
        for backend in a.backends.split(","):
            if backend == "gloo" and a.gloo_debug != "same" and debug != a.gloo_debug:
                continue
            results[f"{backend} debug={debug}"] = run_config(backend, debug, a.pattern, a.timeout, a.world_size)

    print(f"PyTorch's distributed suite (DistributedTest._DistTestBase), world size {a.world_size}, ranks as "
          f"processes")
    print(f"{'configuration':<22} {'ran':>5} {'passed':>7} {'failed':>7} {'skipped':>8} {'seconds':>8}")
    for config, data in results.items():
        c = summarize(data["outcomes"])
        print(f"{config:<22} {c['ran']:>5} {c['passed']:>7} {c['failed']:>7} {c['skipped']:>8} "
              f"{data['seconds']:>8.0f}")

    problems = []
    for config, data in results.items():
        backend = config.split()[0]
        gloo = results.get(config.replace(backend, "gloo", 1))
        for name, (status, detail) in sorted(data["outcomes"].items()):
            if backend != "cclz":
                continue
            listed = name in known
            if status == "failed" and not listed:
                problems.append(f"{config}: {name} failed: {detail}")
            elif status == "failed":
                print(f"{config}: {name} failed as listed ({known[name]})")
            elif status == "passed" and listed:
                problems.append(f"{config}: {name} passed but known_failures.txt lists it: remove it")
            if gloo and status == "skipped" and gloo["outcomes"].get(name, ["", ""])[0] == "passed":
                print(f"{config}: {name} skipped on cclz ({detail}), passed on gloo")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    for p in problems:
        print("PROBLEM:", p)
    print("torch suite: " + ("ok" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
