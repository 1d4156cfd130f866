#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The fault campaign: every piece of tests/faults run once, its JSON lines summed per fault
kind, and one table printed (markdown, as README.md's Reliability section shows it).

  tests/faults/campaign.py [--build DIR] [--trials N] [--seed S] [--quick]
                           [--soak-minutes M] [--soak-calls N] [--churn-cycles N]
                           [--api-inputs N] [--decoder-inputs N] [--only KIND,...]
                           [--lines FILE] [--table FILE]
  tests/faults/campaign.py --merge LINES...   # one table from the --lines of several runs

--quick is CI's reduced campaign: a few trials per kind, the load at a small size, the
decoder fuzzers for a few seconds each. Without it the sizes are the full run's (README).
Exits 1 when any trial is not ok (a hang, a crash, a wrong result, a survivor that neither
failed nor completed, a recovery that did not work), 0 otherwise. Pieces that cannot run
here (no PyTorch environment, no clang for the fuzzers) are listed as skipped, with why.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run_piece(name, argv, timeout, env=None):
    """Runs one piece; returns (its JSON lines, a note when it produced none or failed)."""
    print("== %s: %s" % (name, " ".join(argv)), file=sys.stderr, flush=True)
    start = time.monotonic()
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        lines = parse_lines(out)
        lines.append({"kind": name, "trial": -1, "ok": False, "hangs": 1,
                      "detail": "the piece itself ran past %d s" % timeout})
        return lines, None
    lines = parse_lines(p.stdout)
    took = time.monotonic() - start
    print("   %d lines in %.0f s, exit %d" % (len(lines), took, p.returncode), file=sys.stderr, flush=True)
    if p.returncode == 77:  # the pieces' "skipped" status
        return [], (p.stdout + p.stderr).strip().splitlines()[-1:] or ["skipped"]
    if not lines or (p.returncode != 0 and all(l.get("ok") for l in lines)):
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        lines.append({"kind": name, "trial": -1, "ok": False, "crashes": 1 if p.returncode < 0 else 0,
                      "detail": "exit %d: %s" % (p.returncode, " | ".join(tail))})
    return lines, None


def parse_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def decoder_fuzz(inputs, seconds):
    """fuzz/run.sh by inputs (or seconds); one line per decoder from libFuzzer's final stats."""
    script = os.path.join(ROOT, "fuzz", "run.sh")
    if not (shutil.which("clang++") or shutil.which("clang++-14")):
        return [], ["no clang++ for the libFuzzer targets"]
    argv = [script, "--runs", str(inputs)] if inputs else [script, str(seconds)]
    print("== decoders: %s" % " ".join(argv), file=sys.stderr, flush=True)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = parse_decoder_log(p.stdout)
    if p.returncode != 0 and all(l["ok"] for l in lines):
        lines.append({"kind": "decoders", "trial": -1, "ok": False, "detail": p.stdout.strip().splitlines()[-1:]})
    return lines, None


def parse_decoder_log(text):
    """fuzz/run.sh's output: one line per target, with libFuzzer's count of inputs run."""
    lines, name = [], None
    for row in text.splitlines():
        m = re.match(r"== (fuzz_decode_\S+)", row)
        if m:
            name = m.group(1)
            lines.append({"kind": "decoders", "trial": len(lines), "ok": True, "inputs": 0, "detail": name})
            continue
        m = re.search(r"stat::number_of_executed_units: (\d+)", row)
        if m and lines:
            lines[-1]["inputs"] = int(m.group(1))
        m = re.search(r"the (.*) decoder", row)
        if m and lines:
            lines[-1]["detail"] = "%s (%s)" % (m.group(1), name)
        if "CRASH" in row and lines:
            lines[-1]["ok"] = False
            lines[-1]["crashes"] = 1
    return lines


def torch_python():
    """The PyTorch environment's interpreter (scripts/torch_venv.sh makes it), or None."""
    try:
        out = subprocess.run([os.path.join(ROOT, "scripts", "torch_venv.sh")], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=1800).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None
    for cand in reversed(out):
        if os.access(cand, os.X_OK) and not os.path.isdir(cand):
            return cand
        py = os.path.join(cand, "bin", "python")
        if os.access(py, os.X_OK):
            return py
    return None


def summarise(lines):
    """Per kind: the campaign's figures."""
    kinds = {}
    for l in lines:
        k = kinds.setdefault(l.get("kind", "?"), {"trials": 0, "ok": 0, "survivors": 0, "errors": 0, "completed": 0,
                                                   "hangs": 0, "wrong": 0, "crashes": 0, "t": [], "inputs": 0,
                                                   "rss": [], "heap": [], "fds": [], "bad": [], "named": None})
        k["trials"] += 1
        k["ok"] += 1 if l.get("ok") else 0
        for f in ("survivors", "errors", "completed", "hangs", "wrong", "crashes"):
            k[f] += int(l.get(f, 0) or 0)
        k["t"] += [float(x) for x in l.get("t_error", []) or []]
        k["inputs"] += int(l.get("inputs", 0) or 0)
        if l.get("named") is not None:  # survivors whose error names the lost rank
            k["named"] = (k["named"] or 0) + int(l["named"])
        if l.get("rss_before", -1) is not None and l.get("rss_before", -1) >= 0:
            k["rss"].append((l["rss_before"], l["rss_after"]))
        if l.get("heap_before", -1) is not None and l.get("heap_before", -1) >= 0:
            k["heap"].append((l["heap_before"], l["heap_after"]))
        if l.get("fds_before", -1) is not None and l.get("fds_before", -1) >= 0:
            k["fds"].append((l["fds_before"], l["fds_after"]))
        if not l.get("ok"):
            k["bad"].append("%s #%s: %s" % (l.get("kind"), l.get("trial"), l.get("detail")))
    return kinds


def table(kinds, skipped):
    rows = ["| fault kind | trials ok | survivors: error / completed | errors naming the lost rank | hangs "
            "| wrong results | crashes | time to error, median / worst (s) | RSS before → after (MiB) "
            "| heap in use before → after (KiB) | descriptors before → after | inputs |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in sorted(kinds):
        k = kinds[name]
        t = "%.2f / %.2f" % (statistics.median(k["t"]), max(k["t"])) if k["t"] else "–"
        rss = "–"
        if k["rss"]:
            rss = "%.0f → %.0f" % (max(a for a, _ in k["rss"]) / 1024, max(b for _, b in k["rss"]) / 1024)
        heap = "%d → %d" % (max(a for a, _ in k["heap"]), max(b for _, b in k["heap"])) if k["heap"] else "–"
        fds = "%d → %d" % (max(a for a, _ in k["fds"]), max(b for _, b in k["fds"])) if k["fds"] else "–"
        named = "%d / %d" % (k["named"], k["errors"]) if k["named"] is not None else "–"
        rows.append("| %s | %d / %d | %d / %d | %s | %d | %d | %d | %s | %s | %s | %s | %s |" % (
            name, k["ok"], k["trials"], k["errors"], k["completed"], named, k["hangs"], k["wrong"], k["crashes"], t,
            rss, heap, fds,
            "{:,}".format(k["inputs"]) if k["inputs"] else "–"))
    for name, why in skipped:
        rows.append("| %s | skipped: %s | | | | | | | | | | |" % (name, why))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=None, help="per fault kind (default 20; --quick 2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="CI's reduced campaign")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=5, help="CCL_TIMEOUT of the fault trials, seconds")
    ap.add_argument("--soak-minutes", type=float, default=None)
    ap.add_argument("--soak-calls", type=int, default=None)
    ap.add_argument("--churn-cycles", type=int, default=None)
    ap.add_argument("--api-inputs", type=int, default=None)
    ap.add_argument("--decoder-inputs", type=int, default=None, help="per decoder (full: 1000000)")
    ap.add_argument("--only", default="", help="comma-separated pieces: ranks,hostile,frameworks,load,decoders")
    ap.add_argument("--lines", help="also write every JSON line here")
    ap.add_argument("--table", help="also write the table here")
    ap.add_argument("--merge", nargs="+", help="print the table of these --lines files instead of running "
                    "(a file named *.log is read as fuzz/run.sh's output)")
    a = ap.parse_args()
    if a.merge:
        lines = []
        for path in a.merge:
            with open(path) as fh:
                text = fh.read()
            lines += parse_decoder_log(text) if path.endswith(".log") else parse_lines(text)
        kinds = summarise(lines)
        print(table(kinds, []))
        bad = [b for k in kinds.values() for b in k["bad"]]
        for b_ in bad:
            print("NOT OK: " + b_)
        return 1 if bad else 0
    q = a.quick
    trials = a.trials if a.trials is not None else (2 if q else 20)
    soak_minutes = a.soak_minutes if a.soak_minutes is not None else (0 if q else 30)
    soak_calls = a.soak_calls if a.soak_calls is not None else (500 if q else 100000)
    cycles = a.churn_cycles if a.churn_cycles is not None else (20 if q else 1000)
    api_inputs = a.api_inputs if a.api_inputs is not None else (2000 if q else 200000)
    dec_inputs = a.decoder_inputs if a.decoder_inputs is not None else (0 if q else 1000000)
    only = set(filter(None, a.only.split(",")))
    want = lambda piece: not only or piece in only

    b = a.build
    fr = os.path.join(b, "tests", "faults", "fault_ranks")
    seed = str(a.seed)
    common = ["--ranks", str(a.ranks), "--seed", seed, "--timeout", str(a.timeout)]
    lines, skipped = [], []

    def add(name, argv, timeout, env=None):
        if not os.path.exists(argv[0]) and not argv[0].endswith(".py"):
            skipped.append((name, "%s is not built" % os.path.relpath(argv[0], ROOT)))
            return
        got, skip = run_piece(name, argv, timeout, env)
        lines.extend(got)
        if skip:
            skipped.append((name, skip[0]))

    if want("ranks"):
        # Every survivor's error must name a lost rank (--require-named) where ranks are lost.
        named = ["--require-named", "1"]
        for mode in ("kill", "stop", "abort", "revoke"):
            add(mode, [fr, mode, "--trials", str(trials)] + common + (named if mode in ("kill", "stop") else []),
                120 + trials * (4 * a.timeout + 60))
        # Two ranks lost, each at its own moment: the survivors shrink past both.
        for mode in ("kill", "stop"):
            add(mode + "2", [fr, mode, "--victims", "2", "--trials", str(trials)] + common + named,
                120 + trials * (4 * a.timeout + 60))
    if want("hostile"):
        h = os.path.join(b, "tests", "faults", "hostile")
        add("api_fuzz", [os.path.join(h, "api_fuzz"), "--inputs", str(api_inputs), "--seed", seed], 3600)
        add("bootstrap_fuzz", [os.path.join(h, "bootstrap_fuzz"), "--trials", str(trials), "--seed", seed],
            120 + trials * 60)
    if want("frameworks"):
        f = os.path.join(b, "tests", "faults", "frameworks")
        add("nccl_face_kill", [os.path.join(f, "nccl_face_kill"), "--trials", str(trials), "--seed", seed],
            120 + trials * 60)
        add("nccl_face_shrink", [os.path.join(f, "nccl_face_kill"), "--after", "shrink", "--trials", str(trials),
                                 "--seed", seed], 120 + trials * 60)
        py = torch_python()
        if py:
            for sig in ("kill", "stop"):
                add("ddp_" + sig, [py, os.path.join(HERE, "frameworks", "ddp_kill.py"), "--signal", sig,
                                   "--trials", str(max(1, trials // 2)), "--seed", seed], 300 + trials * 120)
            add("ddp_shrink", [py, os.path.join(HERE, "frameworks", "ddp_kill.py"), "--shrink", "--trials",
                               str(trials), "--seed", seed], 300 + trials * 120)
        else:
            skipped.append(("ddp_kill", "no PyTorch environment (scripts/torch_venv.sh)"))
        gpt = os.path.join(b, "examples", "transformer", "gpt_train")
        add("trainer_kill", [os.path.join(HERE, "frameworks", "trainer_kill.sh"), "--trials",
                             str(max(1, trials // 4)), "--seed", seed, "--gpt-train", gpt], 300 + trials * 120)
    if want("load"):
        add("churn", [fr, "churn", "--cycles", str(cycles), "--ranks", str(a.ranks), "--seed", seed], 7200)
        add("soak", [fr, "soak", "--calls", str(soak_calls), "--minutes", str(soak_minutes), "--ranks",
                     str(a.ranks), "--seed", seed], int(soak_minutes * 60) + 7200)
    if want("decoders"):
        got, skip = decoder_fuzz(dec_inputs, 5 if q else 0)
        lines.extend(got)
        if skip:
            skipped.append(("decoders", skip[0]))

    kinds = summarise(lines)
    text = table(kinds, skipped)
    print(text)
    bad = [b for k in kinds.values() for b in k["bad"]]
    for b_ in bad:
        print("NOT OK: " + b_)
    if a.lines:
        with open(a.lines, "w") as fh:
            for l in lines:
                fh.write(json.dumps(l) + "\n")
    if a.table:
        with open(a.table, "w") as fh:
            fh.write(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
