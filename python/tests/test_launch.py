# SPDX-License-Identifier: BSD-3-Clause
"""init_from_env with torchrun-style environments (ranks as subprocesses), and the package's
installation: import without torch, the header and library it ships."""
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import ccl

RANK_SCRIPT = r"""
import os, sys, numpy as np, ccl
comm = ccl.init_from_env()
y = comm.allreduce(np.full(3, comm.rank + 1, np.int64))
line = "RESULT %d %d %d %d %s" % (comm.rank, comm.size, comm.local_rank, int(y[0]), "torch" in sys.modules)
print(line, flush=True)
if os.environ.get("RESULT_DIR"):  # ranks that share one stdout (torchrun) write a file each
    with open(os.path.join(os.environ["RESULT_DIR"], str(comm.rank)), "w") as f:
        f.write(line)
comm.destroy()
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(nranks, extra_env, timeout=60):
    procs = []
    for r in range(nranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nranks), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   CCL_TIMEOUT="20", **extra_env)
        procs.append(subprocess.Popen([sys.executable, "-c", RANK_SCRIPT], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            assert p.returncode == 0, out
            outs.append([line.split()[1:] for line in out.splitlines() if line.startswith("RESULT")][0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def _check(outs, n, torch_loaded):
    want = n * (n + 1) // 2
    assert sorted(outs) == sorted([[str(r), str(n), str(r), str(want), str(torch_loaded)] for r in range(n)])


def test_unique_id_through_a_file(tmp_path):
    path = tmp_path / "uid"
    outs = _launch(2, {"CCL_UNIQUE_ID_FILE": str(path), "MASTER_PORT": "1"})
    _check(outs, 2, False)  # torch not imported on this path
    assert not path.exists(), "rank 0 should remove the id file once every rank joined"


def test_unique_id_through_a_tcp_store():
    pytest.importorskip("torch")
    _check(_launch(2, {"MASTER_PORT": str(_free_port())}, timeout=90), 2, True)


def test_under_torchrun(tmp_path):
    """torchrun's agent serves the store on MASTER_PORT; the workers are its clients."""
    pytest.importorskip("torch")
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                          "--master_addr=127.0.0.1", "--master_port=%d" % _free_port(), str(script)],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, CCL_TIMEOUT="20", RESULT_DIR=str(tmp_path)))
    assert out.returncode == 0, out.stdout + out.stderr
    results = [(tmp_path / str(r)).read_text().split()[1:] for r in range(2)]
    assert results == [["0", "2", "0", "3", "True"], ["1", "2", "1", "3", "True"]], out.stdout


def test_missing_environment_is_explained():
    with pytest.raises(RuntimeError, match="RANK is not set"):
        ccl.init_from_env(env={})
    with pytest.raises(RuntimeError, match="RANK=3 is outside"):
        ccl.init_from_env(env={"RANK": "3", "WORLD_SIZE": "2"})
    with pytest.raises(RuntimeError, match="WORLD_SIZE='x' is not an integer"):
        ccl.init_from_env(env={"RANK": "0", "WORLD_SIZE": "x"})


def test_store_argument(tmp_path):
    class DictStore:  # the two methods of a torch Store that init_from_env uses
        def __init__(self):
            self.d = {}

        def set(self, k, v):
            self.d[k] = v

        def get(self, k):
            return self.d[k]

    store = DictStore()
    with ccl.init_from_env(env={"RANK": "0", "WORLD_SIZE": "1"}, store=store) as comm:
        assert comm.size == 1 and comm.local_rank == 0
        assert len(list(store.d.values())[0]) == 128


def test_import_does_not_need_torch():
    code = ("import sys; sys.modules['torch'] = None\n"  # make `import torch` fail
            "import ccl, numpy as np\n"
            "with ccl.Comm(1, ccl.get_unique_id(), 0) as c: print(c.allreduce(np.ones(2))[0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "1.0", out.stderr


def test_installed_files_and_version():
    inc = ccl.get_include()
    assert os.path.isfile(os.path.join(inc, "ccl", "ccl.h")), inc
    libdir = ccl.get_library_dir()
    assert any(f.startswith("libccl.so") for f in os.listdir(libdir)), libdir
    assert os.path.isfile(ccl.library_path())
    with open(os.path.join(inc, "ccl", "ccl.h")) as f:
        header = f.read()
    major, minor, patch = (int(v) for v in ccl.__version__.split("."))
    for name, v in (("MAJOR", major), ("MINOR", minor), ("PATCH", patch)):
        assert "#define CCL_%s %d\n" % (name, v) in header
    assert ccl.version_code == major * 10000 + minor * 100 + patch
    from importlib.metadata import version

    assert version("ccl") == ccl.__version__


def test_dtype_and_op_enums_match_the_header():
    header = ""
    for name in ("ccl.h", "compression.h"):  # ccl.h includes compression.h
        with open(os.path.join(ccl.get_include(), "ccl", name)) as f:
            header += f.read()
    for name, enum in (("Float8e4m3", ccl.DataType.FLOAT8_E4M3), ("Bfloat16", ccl.DataType.BFLOAT16),
                       ("Uint64", ccl.DataType.UINT64), ("Avg", ccl.Op.AVG), ("Prod", ccl.Op.PROD),
                       ("CodecPowerSgd", ccl.Codec.POWERSGD), ("OpRecv", ccl.OpKind.RECV),
                       ("RemoteError", ccl.Result.REMOTE_ERROR), ("FeedbackLoco", ccl.FeedbackKind.LOCO)):
        assert "ccl%s = %d," % (name, int(enum)) in header or "ccl%s = %d }" % (name, int(enum)) in header, name
    assert np.dtype("float32").name in ccl._types.NUMPY_DTYPES


def test_codec_and_op_kind_enums_are_the_librarys():
    """Built from the library's names at import: a codec it adds needs no edit here."""
    from ccl import _lib
    assert len(ccl.Codec) == _lib.lib.cclCodecCount() and len(ccl.OpKind) == _lib.lib.cclOpKindCount()
    for c in ccl.Codec:
        assert ccl.codec_name(c) == c.name.lower() and ccl.codec_from_name(c.name.lower()) is c
    assert ccl.OpKind.REDUCESCATTER == 4 and ccl.OpKind.ALLTOALL.name.lower() == "alltoall"
    assert _lib.ALGORITHM_NAMES[0] == "auto" and "hier" in _lib.ALGORITHM_NAMES


def test_compress_lists_use_the_librarys_grammar():
    torch = pytest.importorskip("torch")  # noqa: F841
    import ccl.torch
    assert ccl.torch.Options(compression="int8", compress="all")._compress_list() == "all"
    assert ccl.torch.Options(compression="int8", compress=["allreduce", " reducescatter"])._compress_list() == \
        "allreduce,reducescatter"
    for bad, why in (("reduce_scatter", "reducescatter"), ("everything", "reducescatter"), ("reduce", "never")):
        with pytest.raises(ValueError, match=why):
            ccl.torch.Options(compression="int8", compress=bad)._compress_list()


def test_struct_layouts_match_the_header(tmp_path):
    """The ctypes structs against a C compiler's view of the installed ccl.h."""
    import shutil

    from ccl import _lib

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    structs = {"cclCompression_t": _lib.CompressionStruct, "cclConfig_t": _lib.ConfigStruct,
               "cclStats_t": _lib.StatsStruct, "cclOpStats_t": _lib.OpStatsStruct, "cclUniqueId": _lib.UniqueIdStruct}
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include <ccl/ccl.h>', 'int main(void) {']
    want = []
    for cname, py in structs.items():
        lines.append('printf("%%zu\\n", sizeof(%s));' % cname)
        want.append(__import__("ctypes").sizeof(py))
        for field, _ in py._fields_:
            lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (cname, field))
            want.append(getattr(py, field).offset)
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c99", "-I", ccl.get_include(), str(src), "-o", str(exe)], check=True, timeout=60)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    assert got == want


def test_preload_prints_the_packaged_face():
    """`python -m ccl.preload` names the NCCL face inside the package: a library that exports
    NCCL's functions and reports the NCCL version the face implements."""
    import ctypes

    out = subprocess.run([sys.executable, "-m", "ccl.preload"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    path = out.stdout.strip()
    assert os.path.isfile(path) and os.path.dirname(path) == os.path.join(os.path.dirname(ccl.__file__), "lib")
    face = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    version = ctypes.c_int(0)
    assert face.ncclGetVersion(ctypes.byref(version)) == 0
    assert version.value >= 22800
