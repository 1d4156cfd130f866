# SPDX-License-Identifier: BSD-3-Clause
"""Running the arms: the trainer's command line for a run, its key (configuration, seed,
link, data), the logs kept from earlier runs, and the order runs go in."""

import hashlib
import json
import os
import subprocess

from arms import GROUPS, HERE, LAYOUTS, SCALES, TERA, group_of, layout_value


def command(arm, scale, seed, train, log):
    s = dict(SCALES[scale])
    lay = LAYOUTS[arm.layout]
    grid = list(lay["args"])
    model = list(s["model"])
    steps = layout_value(arm.layout, "steps", scale, s["steps"])
    batch, accum = s["batch"], None
    if "batch_div" in lay:
        batch, accum = max(1, s["batch"] // lay["batch_div"]), 4 * lay["batch_div"]
        grid += ["--accum", str(accum)]
    if "layers" in lay:
        model[model.index("--layers") + 1] = str(lay["layers"])
    seq, every, windows = s["seq"], s["val_every"], s["val_seqs"]
    if arm.tera:
        # Their measure is the step time: one small validation at the end.
        t = TERA[scale]
        seq, batch, steps, every, windows = t["seq"], 1, t["steps"], t["steps"], min(8, windows)
        model[model.index("--max-seq") + 1] = str(seq)
        grid += ["--schedule", "gpipe", "--slice-granularity", str(t["granularity"])]
    if arm.link:
        every = max(1, every // 2)  # time-to-loss rows validate twice as often
    flags = [f.replace("WARMUP", str(max(1, steps // 10))) for f in arm.flags]
    return [train, "--data", data_path(), *model, "--seq", str(seq), "--batch", str(batch), "--steps", str(steps),
            "--val-every", str(every), "--val-seqs", str(windows), "--lr", s["lr"], "--warmup",
            str(s["warmup"]), "--seed", str(seed), "--no-progress", *grid, *flags] + ([] if arm.link else ["--log", log])


def data_path():
    return os.environ["EXPERIMENTS_DATA"]


def can_shape_links():
    if os.geteuid() != 0:
        return False
    probe = f"cclexp-{os.getpid()}"
    ok = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ok


def load(log):
    out = {"steps": [], "vals": [], "summary": None, "codec_error": [], "codec_energy": []}
    if not os.path.exists(log):
        return out
    with open(log) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            kind = r["type"]
            if kind == "step":
                out["steps"].append(r)
            elif kind == "val":
                out["vals"].append(r)
            elif kind == "summary":
                out["summary"] = r
            elif kind in ("codec_error", "codec_energy"):
                out[kind].append(r)
    return out


def run_key(cmd, log):
    """What a run's result depends on: its command (the trainer's path and the log's aside),
    seed and link included, and the data file's size. A log is reused only under the same key."""
    argv = [a for a in cmd[1:] if a != log]
    data = os.environ.get("EXPERIMENTS_DATA", "")
    size = os.path.getsize(data) if data and os.path.exists(data) else 0
    return hashlib.sha1(json.dumps([os.path.basename(cmd[0]), argv, size]).encode()).hexdigest()


def run_name(arm, k, scale):
    """A run's file name: the arm and its seed, or for TeraPipe's timing rounds its round."""
    return f"{arm.name}.r{k}" if arm.tera else f"{arm.name}.s{SCALES[scale]['seeds'][k]}"


def cached(out, name, key):
    log, key_file = os.path.join(out, name + ".jsonl"), os.path.join(out, name + ".key")
    if not load(log)["summary"] or not os.path.exists(key_file):
        return None
    with open(key_file) as f:
        return load(log) if f.read().strip() == key else None


def plan_run(arm, k, scale, train, out):
    name = run_name(arm, k, scale)
    seed = SCALES[scale]["seeds"][0 if arm.tera else k]
    log = os.path.join(out, name + ".jsonl")
    if arm.link:
        cmd = [os.path.join(HERE, "slow_train.sh"), "4", arm.link, log] + command(arm, scale, seed, train, log)
        key = run_key([a for a in cmd if a != train], log)
    else:
        ranks = LAYOUTS[arm.layout].get("ranks", 4)
        cmd = command(arm, scale, seed, train, log) + ["--ranks", str(ranks)]
        key = run_key(cmd, log)
    return name, log, cmd, key


def execute(arm, k, scale, train, out, force):
    """Runs (or reuses) one run; None if it failed."""
    name, log, cmd, key = plan_run(arm, k, scale, train, out)
    if not force:
        hit = cached(out, name, key)
        if hit:
            return hit
    key_file = os.path.join(out, name + ".key")
    for stale in (log, key_file):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    print(f"run {name}: {' '.join(cmd[cmd.index('--seed'):] if not arm.link else cmd[:3])}", flush=True)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(out, name + ".out"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        print(f"run.py: {name} failed:\n{proc.stdout[-3000:]}", flush=True)
        return None
    with open(key_file, "w") as f:
        f.write(key + "\n")
    return load(log)


def schedule(scale, selected):
    """(arm, k) in the order they run: each group to `need` seeds (TeraPipe: its rounds),
    then every group's further seeds."""
    s = SCALES[scale]
    first, later = [], []
    for g, _ in GROUPS:
        arms = [a for a in selected if group_of(a.name) == g]
        for k in range(s["rounds"] if g == "tera" else len(s["seeds"])):
            for a in arms:
                (first if a.tera or k < s["need"] else later).append((a, k))
    return first + later
