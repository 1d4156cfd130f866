#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Runs the layout-equivalence tests (gpt_layout_test) and writes their results as a
Markdown table into the trainer's README, between the lines `<!-- layout-table -->` and
`<!-- /layout-table -->`. Usage: layout_table.py BUILD_DIR [README]. Every row is a test
that ran now; a failing test fails the script."""
import json
import os
import subprocess
import sys
import tempfile

BEGIN, END = "<!-- layout-table -->", "<!-- /layout-table -->"


def run_tests(build):
    binary = os.path.join(build, "examples/transformer/tests/gpt_layout_test")
    if not os.access(binary, os.X_OK):
        sys.exit(f"layout_table.py: {binary} is not built")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "layout.json")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = subprocess.run([binary, "--gtest_filter=Grid/*", f"--gtest_output=json:{out}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            sys.exit("layout_table.py: gpt_layout_test failed:\n" + proc.stdout[-4000:])
        with open(out) as f:
            return json.load(f)


def table(results):
    rows = ["| layout | ranks | micro-batches per data-parallel rank | largest parameter difference "
            "(relative) | largest loss difference (nats) | loss, step 1 → 10 |",
            "| --- | --- | --- | --- | --- | --- |"]
    for suite in results["testsuites"]:
        for t in suite["testsuite"]:
            if "layout" not in t:
                continue
            layout, _, m = t["layout"].rpartition(" m")
            rows.append(f"| {layout} | {t['ranks']} | {m} | {t['param_diff']} | {t['loss_diff']} | "
                        f"{float(t['first_loss']):.3f} → {float(t['last_loss']):.3f} |")
    return "\n".join(rows)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    build = sys.argv[1]
    readme = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(__file__), "..", "README.md")
    with open(readme) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"layout_table.py: {readme} has no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(readme, "w") as f:
        f.write(head + BEGIN + "\n" + table(run_tests(build)) + "\n" + END + tail)
    print(f"layout_table.py: wrote the table into {readme}")


if __name__ == "__main__":
    main()
