"""Issue 21's hostile-input barrage: throws bad params files, --set values, run names, data folders, signals, full
and read-only disks, broken sibling runs, planted links, concurrent runs and mid-run edits at the `cnnbench`
command of a checkout, and writes one row per case to a Markdown table.

    git clone /work/wt/h21 /tmp/h21_clone && cd /tmp/h21_clone
    PYTHONPATH=lib python tools/barrage/barrage.py --work /tmp/h21_barrage [--quick] [--only KIND ...]

Each case records: the exit code, whether stderr is one line with no traceback, whether anything was measured
(a results CSV written) before a validation error, whether it hung (killed at its time limit), and, for the cases
that run notebooks, the case's own check (a resumed run completes, a report shows only this run's rows, ...).
``--quick`` leaves out the cases that run notebooks. Several cases need root (tmpfs mounts, chattr); without it
they are skipped and say so. Nothing is written outside ``--work``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path.cwd()
PY = sys.executable
SMOKE = "params/smoke.yaml"


@dataclass
class Result:
    kind: str
    name: str
    rc: int | None = None
    one_line: bool | None = None
    measured_first: bool | None = None
    hung: bool = False
    check: str = ""  # the case's own check: "" when it has none
    ok: bool = False
    message: str = ""
    seconds: float = 0.0


@dataclass
class Case:
    kind: str
    name: str
    args: list[str] = field(default_factory=list)
    expect_rc: int | tuple = 2
    setup: Callable | None = None  # setup(work: Path) -> extra args
    check: Callable | None = None  # check(work, proc) -> "" when fine, else what is wrong
    timeout: float = 30
    real: bool = False  # runs notebooks (minutes)
    shell: str = ""  # a shell command instead of args (for pipes and ulimit)


def run_cli(args: list[str], work: Path, timeout: float, shell: str = "", env_extra: dict | None = None):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib"), **(env_extra or {})}
    cmd = ["bash", "-c", shell] if shell else [PY, "-m", "cnnbench", *args]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        errors="replace",
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        hung = True
    return proc.returncode, out, err, hung, time.monotonic() - start


def one_line(err: str) -> bool:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return len(lines) == 1 and "Traceback" not in err and len(lines[0]) < 600


def whole_json(path: Path) -> bool:
    try:
        json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


def csvs(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.csv")] if folder.exists() else []


def execute(case: Case, work: Path) -> Result:
    res = Result(case.kind, case.name)
    out = work / "out"
    extra = case.setup(work) if case.setup else []
    if extra is None:
        res.check, res.message = "skipped", "setup not possible here (needs root?)"
        return res
    args = [*case.args, *extra]
    if "--outputs" not in args and not case.shell and args[:1] != ["predict"]:
        args += ["--outputs", str(out)]
    rc, stdout, stderr, hung, secs = run_cli(args, work, case.timeout, case.shell.format(work=work, py=PY))
    res.rc, res.hung, res.seconds = rc, hung, round(secs, 1)
    res.one_line = one_line(stderr) if rc != 0 else "Traceback" not in stderr
    res.message = (stderr.strip().splitlines() or [""])[-1][:160]
    if rc == 2 and args[:1] not in (["report"], ["compare"]):  # refused at validation: nothing measured
        res.measured_first = bool(csvs(out))
    if case.check:
        res.check = case.check(work, rc, stdout, stderr) or "ok"
    expect = case.expect_rc if isinstance(case.expect_rc, tuple) else (case.expect_rc,)
    res.ok = (
        rc in expect
        and not hung
        and bool(res.one_line)
        and not res.measured_first
        and res.check in ("", "ok")
    )
    return res


# --- the cases --------------------------------------------------------------------------------------------------


def write(name: str, content: bytes | str):
    def setup(work: Path):
        path = work / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return ["--params", str(path)]

    return setup


def fifo(work: Path):
    os.mkfifo(work / "p.fifo")
    return ["--params", str(work / "p.fifo")]


SMOKE_TEXT = (ROOT / SMOKE).read_text() if (ROOT / SMOKE).exists() else ""
LAUGHS = (
    "a: &a [x,x,x,x,x,x,x,x,x]\n"
    + "".join(f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    + "models: *i\n"
)


def params_file_cases() -> list[Case]:
    k = "params file"
    cases = [
        Case(k, "non-UTF-8 (Latin-1)", setup=write("latin1.yaml", b"device: cpu\n# caf\xe9\n")),
        Case(k, "UTF-16 with BOM", setup=write("u16.yaml", "device: cpu\n".encode("utf-16"))),
        Case(k, "UTF-16-LE no BOM", setup=write("u16le.yaml", "device: cpu\n".encode("utf-16-le"))),
        Case(k, "UTF-32", setup=write("u32.yaml", "device: cpu\n".encode("utf-32"))),
        Case(k, "FIFO", setup=fifo, timeout=15),
        Case(k, "/dev/zero", ["--params", "/dev/zero"], timeout=15),
        Case(k, "/dev/null", ["--params", "/dev/null"], timeout=15),
        Case(k, "/proc/self/mem", ["--params", "/proc/self/mem"], timeout=15),
        Case(k, "a folder", ["--params", "params"]),
        Case(k, "missing file", ["--params", "params/nope.yaml"]),
        Case(k, "binary garbage", setup=write("garbage.yaml", bytes(range(1, 256)) * 4)),
        Case(k, "duplicate top-level key", setup=write("dup.yaml", SMOKE_TEXT + "repeats: 9\n")),
        Case(
            k,
            "duplicate nested key",
            setup=write(
                "dupn.yaml",
                SMOKE_TEXT.replace("sweep: {mnist_cnn: [8, 16]}", "sweep: {mnist_cnn: [8], mnist_cnn: [16]}"),
            ),
        ),
        Case(k, "billion laughs under 'models'", setup=write("laughs.yaml", LAUGHS), timeout=20),
        Case(k, "file of 50 MB", setup=write("big.yaml", "# " + "x" * 50_000_000 + "\n"), timeout=20),
        Case(k, "value of 1 MB", setup=write("bigval.yaml", "run_name: " + "x" * 1_000_000 + "\n")),
        Case(
            k, "nesting 10k deep", setup=write("deep.yaml", "models: " + "[" * 10_000 + "]" * 10_000 + "\n")
        ),
        Case(k, "top level is a list", setup=write("list.yaml", "- device: cpu\n")),
        Case(k, "top level is a scalar", setup=write("scalar.yaml", "cpu\n")),
        Case(k, "malformed YAML", setup=write("bad.yaml", "models: [mnist_cnn\nbatch_size: 8\n")),
        Case(k, "python tag", setup=write("tag.yaml", "models: !!python/object/apply:os.system ['true']\n")),
        Case(k, "unknown key", setup=write("unk.yaml", SMOKE_TEXT + "batchsize: 8\n")),
        Case(
            k,
            "symlink loop",
            setup=lambda w: (
                os.symlink(w / "loop.yaml", w / "loop.yaml"),
                ["--params", str(w / "loop.yaml")],
            )[1],
        ),
        Case(
            k,
            "unreadable (chattr-free: mode 000 as non-root only)",
            setup=lambda w: (
                None
                if os.geteuid() == 0
                else (
                    write("ro.yaml", SMOKE_TEXT)(w),
                    os.chmod(w / "ro.yaml", 0),
                    ["--params", str(w / "ro.yaml")],
                )[2]
            ),
        ),
        Case(
            k,
            "--outputs a symlink loop",
            setup=lambda w: (
                os.symlink(w / "oloop", w / "oloop"),
                ["--params", SMOKE, "--outputs", str(w / "oloop")],
            )[1],
        ),
        Case(
            k,
            "--outputs is a file",
            setup=lambda w: ((w / "of").write_text("x"), ["--params", SMOKE, "--outputs", str(w / "of")])[1],
        ),
    ]
    return cases


def float_keys() -> list[str]:
    sys.path.insert(0, str(ROOT / "lib"))
    from cnnbench import params

    return [key for key, tp in params._HINTS.items() if tp in (float, list[float])]


def nan_cases() -> list[Case]:
    k = "NaN/inf float key"
    cases = []
    for i, key in enumerate(float_keys()):
        is_list = key in ("transfer_lrs",)
        bad = [".nan", ".inf", "-.inf"][i % 3]
        value = f"[{bad}]" if is_list else bad
        cases.append(Case(k, f"--set {key}={value}", ["--params", SMOKE, "--set", f"{key}={value}"]))
    for key, value in (("window_s", ".nan"), ("lr", ".inf"), ("transfer_lrs", "[0.01, .nan]")):
        cases.append(
            Case(k, f"file {key}: {value}", setup=write(f"nan_{key}.yaml", SMOKE_TEXT + f"{key}: {value}\n"))
        )
    cases += [
        Case(
            k,
            "NaN in a dict's list value (--set)",
            ["--params", SMOKE, "--set", "batch_size_per_model={mnist_cnn: [.nan]}"],
        ),
        Case(
            k,
            "NaN in sweep list (file)",
            setup=write(
                "nan_sweep.yaml",
                SMOKE_TEXT.replace("sweep: {mnist_cnn: [8, 16]}", "sweep: {mnist_cnn: [8, .nan]}"),
            ),
        ),
        Case(k, "NaN as a mapping key", ["--params", SMOKE, "--set", "batch_size_per_model={.nan: 8}"]),
    ]
    return cases


def huge_int_cases() -> list[Case]:
    k = "huge int"
    values = [
        ("threads", "1000000000000"),
        ("seed", str(2**70)),
        ("batch_size", str(2**70)),
        ("image_size", str(2**40)),
        ("sweep", "{mnist_cnn: [" + str(2**70) + "]}"),
        ("cell_timeout_s", str(2**70)),
        ("measured_steps", str(2**64)),
        ("seed", "-1"),
    ]
    return [Case(k, f"--set {key}={v[:24]}", ["--params", SMOKE, "--set", f"{key}={v}"]) for key, v in values]


def set_cases() -> list[Case]:
    k = "--set"
    bad = [
        "batch_size",
        "=5",
        "nokey=1",
        "models=[mnist_cnn",
        "batch_size_per_model={a: 1, a: 2}",
        "notebooks=[]",
        "models=[]",
        "batch_size=0",
        "batch_size=-1",
        "device=tpu",
        "expect_device=T4",
        "batch_size=" + "9" * 100_000,
        "models=[" + "y" * 100_000 + "]",
        "lr=fast",
        "dataset=imagenet21k",
    ]
    return [Case(k, f"--set {b[:40]}", ["--params", SMOKE, "--set", b]) for b in bad]


def run_name_cases() -> list[Case]:
    k = "--run-name"
    names = ["", " ", "../x", "a/b", "a\nb", "x" * 100_000, ".", "..", "-x", "/abs"]
    return [Case(k, f"--run-name {n[:20]!r}", ["--params", SMOKE, "--run-name", n]) for n in names]


def image_folder(root: Path, classes: int, images: int) -> Path:
    from PIL import Image

    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True, exist_ok=True)
        for i in range(images):
            Image.new("RGB", (8, 8), (c * 40, i, 0)).save(root / f"c{c}" / f"{i}.png")
    return root


def data_setup(dataset: str, make: Callable, *more: str):
    def setup(work: Path):
        root = work / "data"
        make(root)
        return ["--params", SMOKE, "--set", f"dataset={dataset}", "--set", f"data_path={root}", *more]

    return setup


def fake_mnist(root: Path):
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        (raw / name).write_bytes(b"this is not an idx file" * 10)


def data_cases() -> list[Case]:
    k = "data folder"
    return [
        Case(
            k,
            "one-class image folder",
            setup=data_setup("imagefolder", lambda r: image_folder(r, 1, 20), "--set", "num_classes=1"),
        ),
        Case(
            k,
            "one-class folder, num_classes=10",
            setup=data_setup("imagefolder", lambda r: image_folder(r, 1, 20)),
        ),
        Case(
            k,
            "wrong Tiny-ImageNet layout",
            setup=data_setup("tiny_imagenet", lambda r: image_folder(r, 2, 2), "--set", "num_classes=200"),
        ),
        Case(k, "fake MNIST idx files", setup=data_setup("mnist", fake_mnist)),
        Case(
            k,
            "fake MNIST for 05 (scratch_dataset)",
            setup=lambda w: (
                fake_mnist(w / "sm"),
                [
                    "--params",
                    SMOKE,
                    "--set",
                    "scratch_dataset=mnist",
                    "--set",
                    f"scratch_data_path={w / 'sm'}",
                ],
            )[1],
        ),
        Case(
            k,
            "fewer images than a batch, loader mode",
            setup=data_setup(
                "imagefolder",
                lambda r: image_folder(r, 10, 1),
                "--set",
                "data_mode=loader",
                "--set",
                "batch_size_per_model={squeezenet1_1: 16, mnist_cnn: 16}",
            ),
        ),
        Case(
            k,
            "fewer images than a batch, device mode",
            setup=data_setup(
                "imagefolder",
                lambda r: image_folder(r, 10, 1),
                "--set",
                "data_mode=device",
                "--set",
                "batch_size_per_model={squeezenet1_1: 16, mnist_cnn: 16}",
            ),
        ),
        Case(
            k,
            "data_path is a file",
            setup=lambda w: (
                (w / "f").write_text("x"),
                ["--params", SMOKE, "--set", "dataset=imagefolder", "--set", f"data_path={w / 'f'}"],
            )[1],
        ),
        Case(
            k,
            "absent MNIST for 05, no download",
            ["--params", SMOKE, "--set", "scratch_dataset=mnist", "--set", "scratch_data_path=/nonexistent"],
        ),
        Case(
            k,
            "absent Oxford-IIIT Pet for 06, no download",
            [
                "--params",
                SMOKE,
                "--set",
                "transfer_dataset=oxford_pet",
                "--set",
                "transfer_data_path=/nonexistent",
            ],
        ),
        Case(
            k,
            "data_path missing",
            ["--params", SMOKE, "--set", "dataset=cifar10", "--set", "data_path=/nonexistent"],
        ),
        Case(k, "empty folder", setup=data_setup("imagefolder", lambda r: r.mkdir())),
        Case(
            k,
            "download of a non-public dataset",
            setup=data_setup("imagefolder", lambda r: None, "--set", "download=true"),
        ),
        Case(
            k,
            "class folder with no image",
            setup=data_setup(
                "imagefolder",
                lambda r: (image_folder(r, 2, 20), (r / "c2").mkdir()),
                "--set",
                "num_classes=3",
            ),
        ),
    ]


# --- cases that need root: a full disk (tmpfs), a read-only folder --------------------------------------------


def mount_tmpfs(path: Path, size: str, ro: bool = False) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True
        ).returncode
        == 0
    )


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def disk_cases() -> list[Case]:
    k = "disk"

    def full(work: Path):
        return (
            [
                "--params",
                SMOKE,
                "--outputs",
                str(work / "full"),
                "--set",
                "notebooks=[00_setup]",
                "--run-name",
                "h21full",
            ]
            if mount_tmpfs(work / "full", "160k")
            else None
        )

    def full_check(work, rc, out, err):
        run = work / "full" / "h21full"
        half = [p.name for p in (run / "notebooks").glob("*") if not whole_json(p)] if run.exists() else []
        tmp = (
            [p.name for p in run.rglob(".*.tmp")] + [p.name for p in run.rglob(".*partial*")]
            if run.exists()
            else []
        )
        unmount(work / "full")
        named = "No space left on device:" in err
        return "ok" if named and not half and not tmp else f"file named: {named}; half-written: {half + tmp}"

    def read_only(work: Path):
        if not mount_tmpfs(work / "ro", "1m"):
            return None
        (work / "ro" / "h21ro").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(work / "ro")], capture_output=True)
        return ["--params", SMOKE, "--outputs", str(work / "ro"), "--run-name", "h21ro"]

    def immutable(work: Path):
        (work / "imm" / "h21imm").mkdir(parents=True)
        if subprocess.run(["chattr", "+i", str(work / "imm" / "h21imm")], capture_output=True).returncode:
            return None
        return ["--params", SMOKE, "--outputs", str(work / "imm"), "--run-name", "h21imm"]

    def efbig(work, rc, out, err):
        return "ok" if "File too large:" in err else "the file is not named"

    return [
        Case(
            k,
            "full disk (tmpfs 160k) during 00_setup",
            expect_rc=1,
            setup=full,
            check=full_check,
            timeout=240,
            real=True,
        ),
        Case(
            k,
            "read-only run folder (ro tmpfs)",
            setup=read_only,
            check=lambda w, *_: unmount(w / "ro") or "ok",
        ),
        Case(
            k,
            "immutable run folder (chattr +i)",
            setup=immutable,
            check=lambda w, *_: subprocess.run(["chattr", "-i", str(w / "imm" / "h21imm")]) and "ok" or "ok",
        ),
        Case(
            k,
            "file size limit (ulimit -f 16: EFBIG)",
            expect_rc=1,
            check=efbig,
            timeout=240,
            real=True,
            shell=f"ulimit -f 16; {{py}} -m cnnbench --params {SMOKE} --set 'notebooks=[00_setup]' "
            "--run-name h21fsize --outputs {work}/out",
        ),
    ]


# --- cases that run notebooks: signals, resume, pipes, siblings, links, reruns, mid-run edits -----------------


def alive_in_session(pgid: int, run: Path | None = None) -> list[str]:
    """Processes left of a run: in its process group, or (kernels start sessions of their own, workers are
    forked from a forkserver) any process whose environment names the run folder (needs /proc and its rights)."""
    out = subprocess.run(["ps", "-eo", "pid,pgid,args"], capture_output=True, text=True).stdout
    left = [ln for ln in out.splitlines()[1:] if ln.split()[1] == str(pgid)]
    for entry in Path("/proc").glob("[0-9]*") if run else []:
        try:
            if str(run).encode() in (entry / "environ").read_bytes() and entry.name != str(os.getpid()):
                left.append(f"{entry.name} {entry.name} {(entry / 'cmdline').read_bytes()[:80]!r}")
        except OSError:
            continue
    return left


def signal_case(sig: int, label: str, expect: int, resume: bool = False) -> Case:
    ignored = "ignored" in label  # as a shell without job control starts `cnnbench ... &`

    def body(work: Path) -> Result:
        res = Result(
            "issue 44" if ignored else "signal", f"{label} mid-run" + (" then resume" if resume else "")
        )
        out = work / "out"
        args = [
            PY,
            "-m",
            "cnnbench",
            "--params",
            SMOKE,
            "--set",
            "notebooks=[00_setup,01_complexity]",
            "--run-name",
            f"h21sig{sig}{'i' * ignored}",
            "--outputs",
            str(out),
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None,
        )
        time.sleep(20)
        os.kill(proc.pid, sig)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            res.hung = True
        time.sleep(5)
        run = out / f"h21sig{sig}{'i' * ignored}"
        left = alive_in_session(proc.pid, run)
        res.rc = proc.returncode
        res.one_line = True if sig == signal.SIGKILL else one_line(err)
        res.message = (err.strip().splitlines() or [""])[-1][:160]
        problems = []
        if not (run / "FAILED.txt").is_file():
            problems.append("no FAILED.txt")
        if left:
            problems.append(f"{len(left)} processes left")
            for ln in left:
                os.kill(int(ln.split()[0]), signal.SIGKILL)
        if resume:
            rc, _, err2, hung, _ = run_cli(args[3:], work, 400)
            if rc != 0 or hung or (run / "FAILED.txt").exists():
                problems.append(f"resume rc {rc} hung {hung}: {err2.strip()[-120:]}")
        res.check = "; ".join(problems) or "ok"
        res.ok = res.rc == expect and not res.hung and res.one_line and res.check == "ok"
        return res

    return body


def concurrent_case(work: Path) -> Result:
    res = Result("concurrent", "second run on a run name being written")
    out = work / "out"
    args = [
        "--params",
        SMOKE,
        "--set",
        "notebooks=[00_setup]",
        "--run-name",
        "h21conc",
        "--outputs",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    first = subprocess.Popen(
        [PY, "-m", "cnnbench", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(6)
    rc, _, err, hung, _ = run_cli(args, work, 30)
    res.rc, res.hung, res.one_line = rc, hung, one_line(err)
    res.message = err.strip()[:160]
    rc1 = first.wait(timeout=300)
    res.check = "ok" if rc1 == 0 else f"the first run exited {rc1}"
    res.ok = rc == 2 and res.one_line and not hung and res.check == "ok"
    return res


def pipe_case(work: Path) -> Result:
    res = Result("console", "`cnnbench ... | head -3` (console closed mid-run)")
    out = work / "out"
    shell = (
        f"{PY} -m cnnbench --params {SMOKE} --set 'notebooks=[00_setup,01_complexity]' --run-name h21pipe "
        f"--outputs {out} | head -1; exit ${{PIPESTATUS[0]}}"
    )
    rc, stdout, err, hung, secs = run_cli([], work, 400, shell)
    res.rc, res.hung, res.seconds = rc, hung, round(secs, 1)
    res.one_line = "Traceback" not in err and "Broken pipe" not in err
    res.message = err.strip()[:160]
    done = (out / "h21pipe" / "notebooks" / "01_complexity.ipynb").is_file()
    res.check = "ok" if done and not (out / "h21pipe" / "FAILED.txt").exists() else "run not complete"
    res.ok = rc == 0 and res.one_line and not hung and res.check == "ok"
    return res


def edit_case(work: Path) -> Result:
    """The params file edited while the run goes on: every notebook must use the values of the start."""
    res = Result("mid-run edit", "params file edited during the run")
    out = work / "out"
    mine = work / "edit.yaml"
    mine.write_text(SMOKE_TEXT)
    args = [
        "--params",
        str(mine),
        "--set",
        "notebooks=[00_setup,02_scenario_a]",
        "--set",
        "models=[mnist_cnn]",
        "--set",
        "processes=1",
        "--set",
        "max_processes=1",
        "--run-name",
        "h21edit",
        "--outputs",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    proc = subprocess.Popen(
        [PY, "-m", "cnnbench", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(8)
    mine.write_text(
        SMOKE_TEXT.replace("mnist_cnn: 16}", "mnist_cnn: 32}").replace("repeats: 2", "repeats: 4")
    )
    _, err = proc.communicate(timeout=500)
    res.rc, res.one_line, res.message = proc.returncode, "Traceback" not in err, err.strip()[:160]
    rows = read_csv(out / "h21edit" / "scenario_a.csv")
    sizes = sorted({r.get("batch_size") for r in rows})
    reps = sorted({r.get("repeats") for r in rows if "repeats" in r})
    saved = (
        json.loads((out / "h21edit" / "params.json").read_text())
        if (out / "h21edit" / "params.json").exists()
        else {}
    )
    pj = saved.get("params", saved)
    res.check = (
        "ok"
        if sizes == ["16"] and reps in ([], ["2"]) and pj.get("repeats") == 2
        else (f"batch sizes {sizes}, repeats {reps}, params.json repeats {pj.get('repeats')}")
    )
    res.ok = res.rc == 0 and res.check == "ok"
    return res


def schema_version() -> int:
    sys.path.insert(0, str(ROOT / "lib"))
    import cnnbench

    return cnnbench.SCHEMA_VERSION


def read_csv(path: Path) -> list[dict]:
    import csv

    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def rerun_case(work: Path) -> list[Result]:
    """One run name twice, the second with other models and image size: 04 and 08 must show only the second's rows.
    The second run also meets broken sibling run folders, a schema-1 table inside a sibling run and links planted
    in outputs/, and merges with the other runs of the barrage into the combined report."""
    out = work / "out"
    for old in [*out.glob("h21rr*"), *out.glob("h21b_*")]:
        subprocess.run(["rm", "-rf", str(old)])
    mine = (
        work / "rr.yaml"
    )  # smoke's values under another name: a smoke run is left out of the combined report
    mine.write_text(SMOKE_TEXT)
    base = [
        "--params",
        str(mine),
        "--set",
        "notebooks=[00_setup,02_scenario_a,04_roofline,08_analysis]",
        "--set",
        "processes=1",
        "--set",
        "max_processes=1",
        "--set",
        "repeats=2",
        "--run-name",
        "h21rr",
        "--outputs",
        str(out),
    ]
    results = []
    rc, _, err, hung, secs = run_cli(
        [*base, "--set", "models=[mnist_cnn]", "--set", "sweep={mnist_cnn: [8]}"], work, 590
    )
    r1 = Result(
        "rerun",
        "first run (mnist_cnn, 32 px)",
        rc=rc,
        hung=hung,
        one_line="Traceback" not in err,
        message=err.strip()[-160:],
        seconds=round(secs, 1),
    )
    r1.check, r1.ok = "ok" if rc == 0 else "failed", rc == 0 and not hung
    results.append(r1)
    # broken siblings, each a folder that looks like a run
    victims = {}
    for name, env in (
        ("h21b_notjson", "{not json"),
        ("h21b_list", "[1, 2]"),
        ("h21b_types", json.dumps({"schema_version": schema_version(), "host_id": [1], "cpu_isa": 5})),
        ("h21b_nonutf8", None),
    ):
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        if env is None:
            (d / "environment.json").write_bytes(b'{"a": "\xe9"}')
        else:
            (d / "environment.json").write_text(env)
    (out / "h21b_folder" / "environment.json").mkdir(parents=True, exist_ok=True)
    (out / "h21b_params").mkdir(exist_ok=True)
    import shutil

    shutil.copy(out / "h21rr" / "environment.json", out / "h21b_params" / "environment.json")
    (out / "h21b_params" / "params.json").write_text("{nope")
    shutil.copytree(out / "h21rr", out / "h21b_schema1", ignore=shutil.ignore_patterns(".lock", "notebooks"))
    sa = out / "h21b_schema1" / "scenario_a.csv"
    text = sa.read_text().splitlines()
    head = text[0].split(",")
    col = head.index("schema_version")
    rows = [ln.split(",") for ln in text[1:]]
    for r in rows:
        r[col] = "1"
    sa.write_text("\n".join([text[0], *[",".join(r) for r in rows]]) + "\n")
    for name in ("h21rr.zip", "h21rr/progress.log", "h21rr/kernel.log", "h21rr/report.html", "report.html"):
        victim = work / f"victim_{name.replace('/', '_')}"
        victim.write_text("precious")
        target = out / name
        if target.exists() or target.is_symlink():
            target.unlink()
        os.symlink(victim, target)
        victims[name] = victim
    rc, _, err, hung, secs = run_cli(
        [
            *base,
            "--set",
            "models=[squeezenet1_1]",
            "--set",
            "image_size=48",
            "--set",
            "sweep={squeezenet1_1: [8]}",
        ],
        work,
        590,
    )
    r2 = Result(
        "rerun",
        "second run (squeezenet1_1, 48 px): 04 and 08 show only its rows",
        rc=rc,
        hung=hung,
        one_line="Traceback" not in err,
        message=err.strip()[-160:],
        seconds=round(secs, 1),
    )
    shown = {}
    for nb in ("04_roofline", "08_analysis"):
        path = out / "h21rr" / "notebooks" / f"{nb}.ipynb"
        text = path.read_text() if path.is_file() else ""
        outputs = [
            o
            for c in (json.loads(text)["cells"] if text else [])
            for o in c.get("outputs", [])
            if not any(w in "".join(c["source"]) for w in ("published", "beside_00"))
        ]  # seeds' tables
        flat = json.dumps(outputs)
        shown[nb] = ("mnist_cnn" in flat, "squeezenet1_1" in flat, bool(text))
    current = out / "h21rr" / "current_rows.json"
    rows = (
        json.loads(current.read_text())["scenario_a.csv"]["scenario_a"]["values"] if current.is_file() else []
    )
    shown["current_rows.json"] = (
        any(r[0] != "squeezenet1_1" or r[6] != "48" for r in rows),
        bool(rows),
        bool(rows),
    )
    wrong = [nb for nb, (old, new, there) in shown.items() if old or not new or not there]
    r2.check = "ok" if not wrong else f"{wrong} show the first run's rows or not the second's: {shown}"
    r2.ok = rc == 0 and not hung and r2.check == "ok"
    results.append(r2)
    combined = (out / "report.html").read_text(errors="replace") if (out / "report.html").is_file() else ""
    left_out = out / "_combined"
    for name in (
        "h21b_notjson",
        "h21b_list",
        "h21b_types",
        "h21b_nonutf8",
        "h21b_folder",
        "h21b_params",
        "h21b_schema1",
    ):
        res = Result("broken sibling", name, rc=rc, one_line=r2.one_line)
        mentioned = name in combined
        res.check = (
            "ok" if rc == 0 and mentioned else f"combined report {'mentions' if mentioned else 'omits'} it"
        )
        res.ok = res.check == "ok"
        results.append(res)
    for name, victim in victims.items():
        res = Result("planted link", f"outputs/{name} -> a file outside", rc=rc, one_line=r2.one_line)
        res.check = "ok" if victim.read_text() == "precious" else "the file outside was written"
        res.ok = res.check == "ok"
        results.append(res)
    _ = left_out
    return results


# --- issue 30: the second barrage ---------------------------------------------------------------------------------

EXAMPLE = ROOT / "examples" / "example-cpu-2core"
SCRIPT = "<script>alert('x')</script>"


def said(*texts: str) -> Callable:
    """A check: stderr holds every one of ``texts``."""
    return lambda work, rc, out, err: next((f"message lacks {t!r}" for t in texts if t not in err), "ok")


def bound_cases() -> list[Case]:
    """Every value that sizes time, memory or processes bounded before any work, the message naming --set."""
    k = "bound"
    sets = [
        "window_s=1.0e+9",
        "repeats=1000000000",
        "telemetry_interval_s=1.0e+15",
        "matmul_size=1000000",
        "stream_mb=100000000",
        "tune_max_batch_size=1073741824",
        "workers=1000000000000000",
        "processes=1000000000",
        "scratch_batch_size=1000000",
        "device=cpu:3",
        "models=[mnist_cnn, mnist_cnn]",
        "phases=[train, train]",
        "k" * 10_000 + "=1",
    ]
    cases = [Case(k, f"--set {s[:40]}", ["--params", SMOKE, "--set", s], check=said("--set")) for s in sets]
    merge = (
        "device: cpu\nepoch_images_per_model: &a {mnist_cnn: 16}\nbatch_size_per_model: &b {mnist_cnn: 8}\n"
        "sweep:\n  <<: *a\n  <<: *b\n"
    )
    return cases + [
        Case(
            k,
            "--set seed=1 --set seed=2",
            ["--params", SMOKE, "--set", "seed=1", "--set", "seed=2"],
            check=said("--set", "twice"),
        ),
        Case(k, "a merge key '<<' twice", setup=write("merge.yaml", merge), check=said("'<<'")),
        Case(
            k,
            "a variant key at the top level (precision: fp16)",
            setup=write("prec.yaml", SMOKE_TEXT + "precision: fp16\n"),
            check=said("variants"),
        ),
    ]


def special_files(root: Path):
    image_folder(root, 2, 4)
    os.mkfifo(root / "c1" / "x.png")


def link_loops(root: Path):
    image_folder(root, 2, 4)
    os.symlink(".", root / "c0" / "loop1")
    os.symlink(".", root / "c0" / "loop2")


def data30_cases() -> list[Case]:
    k = "data folder"
    offline = "unshare -n " if os.geteuid() == 0 else ""  # no network, whatever this machine has
    return [
        Case(
            k,
            "a FIFO named x.png in a class folder",
            setup=data_setup("imagefolder", special_files, "--set", "num_classes=2"),
            check=said("x.png", "not a regular file"),
            timeout=60,
        ),
        Case(
            k,
            "two '-> .' link loops in a class folder",
            setup=data_setup("imagefolder", link_loops, "--set", "num_classes=2"),
            check=said("loop"),
            timeout=60,
        ),
        Case(
            k,
            "download: true with no network",
            check=said("cannot reach", "by hand"),
            timeout=90,
            shell=offline + "{py} -m cnnbench --params " + SMOKE + " --set dataset=tiny_imagenet --set "
            "num_classes=200 --set data_path={work}/tiny --set download=true --outputs {work}/out",
        ),
    ]


def copy_run(target: Path) -> Path:
    shutil.copytree(
        EXAMPLE, target, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp", "*.inputs.json")
    )
    return target


def _with_rate(value: str) -> Callable:
    """The first row of scenario_a.csv with its throughput set to ``value``."""

    def tamper(header: str, row: str) -> list[str]:
        cells = next(csv.reader([row]))
        cells[next(csv.reader([header])).index("throughput_img_s")] = value
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(cells)
        return [buf.getvalue()]

    return tamper


TAMPERED = {
    "a negative rate": _with_rate("-250.5"),
    "an inf rate": _with_rate("inf"),
    "a duplicated row": lambda header, row: [row, row],
    "30,000 copies of a row": lambda header, row: [row] * 30_000,
}


def broken(how: str) -> Callable:
    def setup(work: Path):
        out = work / "out"
        copy_run(out / "good")
        bad = copy_run(out / "bad")
        env = json.loads((bad / "environment.json").read_text())
        if how == "half-written row":
            text = (bad / "scenario_a.csv").read_text()
            (bad / "scenario_a.csv").write_text(text[: len(text) - 40])
        elif how == "FAILED.txt":
            (bad / "FAILED.txt").write_text("This run did not finish: killed\n")
        elif how in TAMPERED:  # issue 44: values no run writes, shown as measured before
            header, first, *rest = (bad / "scenario_a.csv").read_text().splitlines(keepends=True)
            (bad / "scenario_a.csv").write_text(
                header + "".join(TAMPERED[how](header, first)) + "".join(rest)
            )
        else:
            env.update(
                {"device_name": ["x"]} if how == "environment of wrong types" else {"schema_version": 99}
            )
            (bad / "environment.json").write_text(json.dumps(env))
        return ["report", str(bad)]

    return setup


def same_verdict(work, rc, out, err) -> str:
    """compare judges the broken run as report did: exit 2, the same reason."""
    rc2, _, err2, _, _ = run_cli(["compare", "good", "bad", "--outputs", str(work / "out")], work, 120)
    reason = err.split("bad", 1)[-1].strip(" :(")[:30]
    return (
        "ok"
        if rc2 == 2 and one_line(err2) and reason in err2
        else f"compare exit {rc2}: {err2.strip()[:100]}"
    )


def report_cases() -> list[Case]:
    k = "report and compare"
    victim = lambda w: (copy_run(w / "elsewhere" / "victim"), (w / "out").mkdir())  # noqa: E731

    def untouched(work, rc, out, err):
        written = [p.name for p in (work / "elsewhere" / "victim").glob("report*.html")]
        return "ok" if not written else f"written outside --outputs: {written}"

    return [
        Case(
            k,
            "report --run-name '../elsewhere/victim'",
            setup=lambda w: (
                victim(w),
                ["report", "--run-name", "../elsewhere/victim", "--outputs", str(w / "out")],
            )[1],
            check=untouched,
            timeout=120,
        ),
        Case(
            k,
            "compare ../elsewhere/victim seeds",
            setup=lambda w: (
                victim(w),
                ["compare", "../elsewhere/victim", "seeds", "--outputs", str(w / "out")],
            )[1],
            timeout=120,
        ),
        Case(
            k,
            "compare --out inside /proc",
            setup=lambda w: (
                copy_run(w / "out" / "a"),
                ["compare", "a", "seeds", "--outputs", str(w / "out"), "--out", "/proc/cnnbench/x"],
            )[1],
            check=said("/proc/cnnbench/x"),
            timeout=120,
        ),
        Case(k, "report --outputs inside /proc", ["report", "--outputs", "/proc/cnnbench/x"], timeout=60),
        *(
            Case(
                k,
                f"report and compare of a run with {how}",
                setup=broken(how),
                check=same_verdict,
                timeout=240,
            )
            for how in ("half-written row", "environment of wrong types", "FAILED.txt", "future schema")
        ),
        *(
            Case("issue 44", f"report and compare of a run whose scenario_a.csv holds {how}", setup=broken(how),
                 check=same_verdict, timeout=240)
            for how in TAMPERED
        ),
    ]  # fmt: skip


def issue44_cases() -> list[Case]:
    """Issue 44's third barrage, the cases that run no notebook: each a one-line refusal (exit 2) before any work,
    or (exit 0) the command's work with no traceback and nothing made that it must not make."""
    k, predict = "issue 44", ["predict", "--device", "Tesla T4"]

    def compare_over(text: str):
        return lambda w: (
            (copy_run(w / "out" / "a"), (w / "out" / "compare.csv").write_text(text))[0]
            and ["compare", "a", "seeds", "--outputs", str(w / "out")]
        )

    def no_folder(work, rc, out, err):
        return "ok" if not (work / "a").exists() else "--estimate made the --outputs folder chain"

    positive = said("must be a positive integer")
    cache = "mkdir -p {work}/f && touch {work}/f/file && CNNBENCH_CACHE={work}/f/file/cache "
    return [
        Case(k, "compare over a cut compare.csv", setup=compare_over("schema_version,compared\n3,a b\n3,a"),
             check=said("cut short"), timeout=120),
        Case(k, "compare over an older-schema compare.csv", setup=compare_over("schema_version,compared\n2,a b\n"),
             check=said("results schema 2"), timeout=120),
        Case(k, "--estimate with a cache under a file", expect_rc=0, timeout=300,
             shell=cache + "{py} -m cnnbench --params params/smoke.yaml --outputs {work}/out --estimate"),
        Case(k, "--estimate --outputs a/b", ["--params", SMOKE, "--estimate"], expect_rc=0, timeout=300,
             setup=lambda w: ["--outputs", str(w / "a" / "b")], check=no_folder),
        Case(k, "models: [inception_v3] at 224 px", ["--params", SMOKE, "--set", "models=[inception_v3]",
             "--set", "image_size=224"], check=said("inception_v3"), timeout=120),
        Case(k, "predict --image-size -3", [*predict, "resnet18", "--image-size", "-3"], check=positive),
        Case(k, "predict --batch-size -1", [*predict, "resnet18", "--batch-size", "-1"], check=positive),
        Case(k, "predict --batch-size 0", [*predict, "resnet18", "--batch-size", "0"], check=positive),
        Case(k, "predict batch 1 at 32 px", [*predict, "resnet18", "--batch-size", "1", "--image-size", "32"],
             check=said("cannot run"), timeout=120),
        Case(k, "predict inception_v3 at 224 px", [*predict, "inception_v3", "--image-size", "224"],
             check=said("cannot run"), timeout=120),
        Case(k, "predict vit_b_16 at 33 px", [*predict, "vit_b_16", "--image-size", "33"], check=said("cannot run"),
             timeout=120),
        Case(k, "predict without --device", ["predict", "resnet18"], check=said("required: --device")),
    ]  # fmt: skip


def hostile_report_case(work: Path) -> Result:
    """A run folder copied in whose every text field holds a script: report.html and the combined report run none."""
    res = Result("report and compare", "report of a hostile run folder (and the combined report)")
    out = work / "hostile"
    subprocess.run(["rm", "-rf", str(out)])
    copy_run(out / "mine")
    run = copy_run(out / "h<script>x")
    env = json.loads((run / "environment.json").read_text())
    (run / "environment.json").write_text(
        json.dumps({k: SCRIPT if isinstance(v, str) and k != "host_id" else v for k, v in env.items()})
    )
    prm = json.loads((run / "params.json").read_text())
    prm.update(params_file=SCRIPT, data_path=SCRIPT, overrides={"x": SCRIPT})
    (run / "params.json").write_text(json.dumps(prm))
    rows = read_csv(run / "scenario_a.csv")
    import csv

    with open(run / "scenario_a.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**r, "device_name": SCRIPT, "machine_note": SCRIPT} for r in rows)
    rc, _, err, hung, secs = run_cli(["report", str(run)], work, 400)
    res.rc, res.hung, res.one_line, res.seconds = rc, hung, "Traceback" not in err, round(secs, 1)
    res.message = err.strip()[-160:]
    pages = [p for p in (run / "report.html", out / "report.html") if p.is_file()]
    raw = [p.name for p in pages if "<script>alert" in p.read_text()]
    res.check = (
        "ok" if len(pages) == 2 and not raw else f"pages {[p.name for p in pages]}, raw script in {raw}"
    )
    res.ok = rc == 0 and not hung and res.check == "ok"
    return res


def progress_log_case(work: Path) -> Result:
    res = Result("report and compare", "cnnbench report keeps the run's progress.log")
    run = work / "plog" / "a"
    subprocess.run(["rm", "-rf", str(run.parent)])
    copy_run(run)
    (run / "notebooks" / "08_analysis.ipynb").unlink()  # 08 is executed again
    before = (run / "progress.log").read_bytes()
    rc, _, err, hung, secs = run_cli(["report", str(run)], work, 400)
    res.rc, res.hung, res.one_line, res.seconds = rc, hung, "Traceback" not in err, round(secs, 1)
    res.check = "ok" if (run / "progress.log").read_bytes() == before else "progress.log changed"
    res.ok = rc == 0 and not hung and res.check == "ok"
    return res


def pipeline(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    return subprocess.Popen(
        [PY, "-m", "cnnbench", *args],
        cwd=ROOT,
        env=env,
        text=True,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def run_procs(run: Path) -> list[str]:
    """Processes whose environment names the run folder (the kernel, its forkserver and workers)."""
    sys.path.insert(0, str(ROOT / "lib"))
    from cnnbench import paths

    return [f"{pid} {cmd}" for pid, folder, cmd in paths.run_processes() if folder == str(run)]


MEASURING = [
    "--set",
    "notebooks=[00_setup,02_scenario_a]",
    "--set",
    "models=[mnist_cnn]",
    "--set",
    "phases=[train]",
    "--set",
    "measured_steps=0",
    "--set",
    "processes=1",
    "--set",
    "max_processes=1",
]


def kill_group_case(work: Path) -> Result:
    """SIGKILL to the pipeline's process group mid-window: no process of the run is left 10 s later."""
    res = Result("processes", "kill -9 of the pipeline's process group mid-window: nothing left after 10 s")
    out, run = work / "out", work / "out" / "h30kill"
    proc = pipeline(
        [
            "--params",
            SMOKE,
            *MEASURING,
            "--set",
            "window_s=60",
            "--set",
            "repeats=1",
            "--run-name",
            "h30kill",
            "--outputs",
            str(out),
        ]
    )
    deadline, seen = time.monotonic() + 300, []
    while time.monotonic() < deadline and proc.poll() is None and len(seen) < 4:
        seen = run_procs(run)  # kernel, resource tracker, forkserver, worker
        time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    time.sleep(10)
    left = run_procs(run)
    for ln in left:
        os.kill(int(ln.split()[0]), signal.SIGKILL)
    res.rc, res.one_line = proc.returncode, True
    res.check = "ok" if len(seen) >= 4 and not left else f"seen {len(seen)}; left: {left}"
    res.ok = res.check == "ok"
    return res


def leftover_case(work: Path) -> Result:
    """A process of an earlier run whose pipeline has gone: a new run names it in one line."""
    res = Result("processes", "a new run names the leftover process of an earlier run")
    env = {**os.environ, "CNNBENCH_RUN_LOCK": str(work / "out" / "h30gone")}
    left = subprocess.Popen([PY, "-c", "import time; time.sleep(300)"], env=env)
    rc, out, err, hung, secs = run_cli(
        [
            "--params",
            SMOKE,
            "--set",
            "notebooks=[00_setup]",
            "--run-name",
            "h30left",
            "--outputs",
            str(work / "out"),
        ],
        work,
        300,
    )
    left.kill()
    line = next((ln for ln in out.splitlines() if str(left.pid) in ln), "")
    res.rc, res.hung, res.one_line, res.seconds, res.message = (
        rc,
        hung,
        "Traceback" not in err,
        round(secs, 1),
        line,
    )
    res.check = "ok" if "h30gone" in line and f"kill {left.pid}" in line else "not named"
    res.ok = rc == 0 and not hung and res.check == "ok"
    return res


def sigstop_case(work: Path) -> Result:
    """The measuring worker stopped (SIGSTOP) 8 s inside a window: the row counts a stalled window, judged busy."""
    res = Result("processes", "SIGSTOP of the measuring worker for 8 s inside a window")
    out, run = work / "out", work / "out" / "h30stop"
    subprocess.run(["rm", "-rf", str(run)])
    proc = pipeline(
        [
            "--params",
            SMOKE,
            *MEASURING,
            "--set",
            "window_s=6",
            "--set",
            "repeats=2",
            "--run-name",
            "h30stop",
            "--outputs",
            str(out),
        ]
    )
    worker, deadline = None, time.monotonic() + 300
    while worker is None and time.monotonic() < deadline and proc.poll() is None:
        forks = [ln for ln in run_procs(run) if "forkserver" in ln]
        worker = max((int(ln.split()[0]) for ln in forks), default=None) if len(forks) >= 2 else None
        time.sleep(0.5)
    if worker is not None:
        time.sleep(4)  # past its warm-up, inside its first window
        os.kill(worker, signal.SIGSTOP)
        time.sleep(8)
        os.kill(worker, signal.SIGCONT)
    _, err = proc.communicate(timeout=400)
    rows = read_csv(run / "scenario_a.csv")
    res.rc, res.one_line, res.message = proc.returncode, "Traceback" not in err, err.strip()[-160:]
    flagged = [
        r
        for r in rows
        if r.get("stalled_windows") not in ("", "0", None) and r.get("machine_state") == "busy"
    ]
    res.check = (
        "ok" if worker and flagged else f"worker {worker}; rows {[r.get('machine_note') for r in rows]}"
    )
    res.ok = proc.returncode == 0 and res.check == "ok"
    return res


def two_runs_case(work: Path) -> Result:
    """Two pipelines measuring at the same time: each one's rows are judged busy, naming the other run."""
    res = Result("processes", "two pipelines measuring at the same time")
    out = work / "out"
    procs = [
        pipeline(
            [
                "--params",
                SMOKE,
                *MEASURING,
                "--set",
                "window_s=2",
                "--set",
                "repeats=2",
                "--run-name",
                name,
                "--outputs",
                str(out),
            ]
        )
        for name in ("h30twoa", "h30twob")
    ]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    notes = {
        name: [r.get("machine_note", "") for r in read_csv(out / name / "scenario_a.csv")]
        for name in ("h30twoa", "h30twob")
    }
    res.rc = max(p.returncode for p in procs)
    res.one_line = all("Traceback" not in e for e in errs)
    seen = [n for n, rows in notes.items() if rows and all("another run of this workbook" in r for r in rows)]
    res.check = "ok" if len(seen) == 2 else f"notes: {notes}"
    res.ok = res.rc == 0 and res.check == "ok"
    return res


def params_json_edit_case(work: Path) -> Result:
    """params.json edited by hand between notebooks: the next notebook is refused in one line."""
    res = Result("mid-run edit", "the run's params.json edited between notebooks")
    out, run = work / "out", work / "out" / "h30pj"
    subprocess.run(["rm", "-rf", str(run)])
    proc = pipeline(
        [
            "--params",
            SMOKE,
            "--set",
            "notebooks=[00_setup,01_complexity]",
            "--run-name",
            "h30pj",
            "--outputs",
            str(out),
        ]
    )
    deadline = time.monotonic() + 300
    while not (run / "notebooks" / "00_setup.ipynb").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    pj = run / "params.json"
    pj.write_text(pj.read_text().replace('"repeats": 2', '"repeats": 5'))
    _, err = proc.communicate(timeout=400)
    res.rc, res.one_line, res.message = proc.returncode, one_line(err), err.strip()[-160:]
    res.check = "ok" if "params.json changed" in err else "not refused"
    res.ok = proc.returncode == 1 and res.one_line and res.check == "ok"
    return res


# --- driver -----------------------------------------------------------------------------------------------------


def quick_cases() -> list[Case]:
    return [
        *params_file_cases(),
        *nan_cases(),
        *huge_int_cases(),
        *set_cases(),
        *run_name_cases(),
        *data_cases(),
        *disk_cases(),
        *bound_cases(),
        *data30_cases(),
        *report_cases(),
        *issue44_cases(),
    ]


def bad_notebook_case(work: Path) -> Result:
    res = Result("workbook", "a notebook file that is not JSON")
    root = work / "workbook"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(root)], check=True)
    (root / "notebooks" / "00_setup.ipynb").write_text('{"cells": [')
    rc, _, err, hung, secs = run_cli(
        [
            "--params",
            SMOKE,
            "--set",
            "notebooks=[00_setup]",
            "--outputs",
            str(work / "out"),
            "--run-name",
            "h21nb",
        ],
        work,
        120,
        env_extra={"CNNBENCH_ROOT": str(root)},
    )
    res.rc, res.hung, res.one_line, res.message = rc, hung, one_line(err), err.strip()[:160]
    res.check = "ok" if (work / "out" / "h21nb" / "FAILED.txt").is_file() else "no FAILED.txt"
    res.ok = rc == 1 and res.one_line and not hung and res.check == "ok"
    return res


def table(results: list[Result]) -> str:
    def b(v):
        return "" if v is None else ("yes" if v else "no")

    lines = [
        "| # | kind | case | exit | one line, no traceback | measured before refusal | hung | own check | "
        "handled | message (last line of stderr) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(results, 1):
        msg = r.message.replace("|", "\\|").replace("\n", " ")[:140]
        handled = "skipped" if r.check == "skipped" else ("yes" if r.ok else "**NO**")
        lines.append(
            f"| {i} | {r.kind} | {r.name.replace('|', '/')[:70]} | {r.rc} | {b(r.one_line)} | "
            f"{b(r.measured_first)} | {b(r.hung)} | {r.check} | {handled} | `{msg}` |"
        )
    kinds: dict[str, list[int]] = {}
    for r in results:
        if r.check == "skipped":
            continue
        kinds.setdefault(r.kind, [0, 0])[0 if r.ok else 1] += 1
    lines += ["", "| kind | handled | not handled |", "|---|---|---|"]
    lines += [f"| {k} | {h} | {n} |" for k, (h, n) in kinds.items()]
    total_h = sum(h for h, _ in kinds.values())
    total_n = sum(n for _, n in kinds.values())
    lines.append(f"| **all** | **{total_h}** | **{total_n}** |")
    return "\n".join(lines) + "\n"


def from_table(path: Path) -> list[Result]:
    """The rows of a table this script wrote (to merge a partial rerun, ``--only``, into it)."""
    rows = []
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 10 or not cells[0].isdigit():
            continue

        def b(v):
            return None if v == "" else v == "yes"

        rc = None if cells[3] == "None" else int(cells[3])
        rows.append(
            Result(
                cells[1],
                cells[2],
                rc,
                b(cells[4]),
                b(cells[5]),
                b(cells[6]) or False,
                cells[7],
                cells[8] == "yes",
                cells[9].strip("`"),
            )
        )
    return rows


def merged(old: list[Result], new: list[Result], kinds: set[str]) -> list[Result]:
    """``old`` with the rows of ``kinds`` replaced by ``new``'s, in the place of the first of each kind."""
    out, placed = [], set()
    for r in old:
        if r.kind not in kinds:
            out.append(r)
        elif r.kind not in placed:
            placed.add(r.kind)
            out += [n for n in new if n.kind == r.kind]
    return out + [n for n in new if n.kind not in placed]


KINDS = (
    "params file",
    "NaN/inf float key",
    "huge int",
    "--set",
    "--run-name",
    "data folder",
    "disk",
    "bound",
    "report and compare",
    "processes",
    "issue 44",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="/tmp/barrage", help="scratch folder (emptied per case)")
    ap.add_argument("--quick", action="store_true", help="leave out the cases that run notebooks")
    ap.add_argument("--only", nargs="*", help="kinds to run")
    ap.add_argument("--table", default="", help="write the Markdown table here too")
    ap.add_argument(
        "--merge", default="", help="a table of an earlier barrage: --only's kinds are replaced in it"
    )
    args = ap.parse_args()
    if (
        args.only
    ):  # "set" and "run-name" name the kinds "--set" and "--run-name" (argparse takes "--x" for options)
        args.only = [k for k in KINDS if k.strip("-") in {o.strip("-") for o in args.only}] + [
            o for o in args.only if o.strip("-") not in {k.strip("-") for k in KINDS}
        ]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for i, case in enumerate(quick_cases()):
        if args.only and case.kind not in args.only:
            continue
        if args.quick and case.real:
            continue
        case_dir = work / f"c{i:03d}"
        subprocess.run(["rm", "-rf", str(case_dir)])
        case_dir.mkdir()
        r = execute(case, case_dir)
        print(
            f"{'skip' if r.check == 'skipped' else 'ok ' if r.ok else 'BAD'} {r.kind}: {r.name[:60]} rc={r.rc} {r.check} {r.message[:100]}",
            flush=True,
        )
        results.append(r)
    if not args.quick:
        shared = work / "runs"  # the runs share one outputs folder, so the combined report merges them
        shared.mkdir(exist_ok=True)
        bodies = [
            ("signal", signal_case(signal.SIGINT, "SIGINT", 130)),
            ("issue 44", signal_case(signal.SIGINT, "SIGINT, inherited ignored (a script's `&`),", 130)),
            ("signal", signal_case(signal.SIGTERM, "SIGTERM", 143)),
            ("signal", signal_case(signal.SIGHUP, "SIGHUP", 129)),
            ("signal", signal_case(signal.SIGKILL, "kill -9", -9, resume=True)),
            ("concurrent", concurrent_case),
            ("console", pipe_case),
            ("workbook", bad_notebook_case),
            ("mid-run edit", edit_case),
            ("mid-run edit", params_json_edit_case),
            ("report and compare", hostile_report_case),
            ("report and compare", progress_log_case),
            ("processes", kill_group_case),
            ("processes", leftover_case),
            ("processes", sigstop_case),
            ("processes", two_runs_case),
        ]
        for kind, body in bodies:
            if args.only and kind not in args.only:
                continue
            try:
                r = body(shared)
            except Exception as err:  # the driver's own failure is a row too
                r = Result(kind, getattr(body, "__name__", kind), check=f"driver error: {err!r}"[:200])
            print(
                f"{'ok ' if r.ok else 'BAD'} {r.kind}: {r.name} rc={r.rc} {r.check} {r.message[:100]}",
                flush=True,
            )
            results.append(r)
        if not args.only or "rerun" in args.only:
            try:
                rows = rerun_case(shared)
            except Exception as err:
                rows = [
                    Result(
                        "rerun",
                        "rerun with other models and image size",
                        check=f"driver error: {err!r}"[:200],
                    )
                ]
            for r in rows:
                print(f"{'ok ' if r.ok else 'BAD'} {r.kind}: {r.name} rc={r.rc} {r.check}", flush=True)
                results.append(r)
    if args.merge:
        kinds = set(args.only or []) | (
            {"broken sibling", "planted link"} if "rerun" in (args.only or []) else set()
        )
        results = merged(from_table(Path(args.merge)), results, kinds)
    text = table(results)
    (work / "summary.md").write_text(text)
    if args.table:
        Path(args.table).write_text(text)
    print(text)
    return 0 if all(r.ok or r.check == "skipped" for r in results) else 1


if __name__ == "__main__":
    _ = math
    sys.exit(main())
