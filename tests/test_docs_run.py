"""Every Python and shell block of README.md and docs/*.md runs as written (issue 16).

Each page runs in a fresh temporary copy of the repository's tracked files (the commands
name ``examples/`` and ``benchmarks/`` paths; numba's cache of the kernels is copied too),
as a reader would run it top to bottom:

- its ```python blocks in sequence in one interpreter and one namespace;
- its ```bash / ```sh / ```shell blocks in sequence in one shell (``set -eo pipefail``:
  a failing command fails its block), in its own process group, which is killed when the
  page is done, so a background process the page leaves behind cannot outlive the test.
  ``TMPDIR`` points inside the copy, so ``mktemp -d`` stays there and goes with it.

``pip`` in a shell block is a stand-in that installs nothing (reinstalling would change
the environment under test): it checks that every requirement ``pip install -e .[extras]``
would install, as pinned in the copy's pyproject.toml, is installed at that version.

A block is skipped only by the marker ``<!-- docs-run: skip (reason) -->`` on the last
non-blank line before it, with a reason. ``FEDFOREST_DOCS_RUN_MARKED=id,id`` (block ids
``page:line``, or pages) runs marked blocks too, e.g. the Flower deployment of
docs/flower.md. A page runs once per test session (a file lock shares the result between
pytest-xdist workers); each block is its own test, named ``page:line``, and a failure
names the block that failed with its output.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._loopback import scaled

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
RUN = {"python": "python", "bash": "shell", "sh": "shell", "shell": "shell"}
MARKER = re.compile(r"^<!--\s*docs-run:(.*)-->\s*$")
SKIP = re.compile(r"^\s*skip\s*\((.+)\)\s*$")
#: First words of a shell command: a fence that starts with one must name its language.
COMMANDS = re.compile(r"^(python3? |fedforest |pip |for |mkdir |cd |export |git |bash |\w+=\S* )")
PAGE_TIMEOUT = 900  # seconds for one page's blocks of one kind, on a machine not overloaded


def page_timeout() -> float:
    """``PAGE_TIMEOUT`` grown with the load: a page that waits for CPU on a busy 2-core box
    is not a page that hangs (``tests._loopback.scaled``)."""
    return scaled(PAGE_TIMEOUT)


#: Marked blocks to run all the same (block ids or pages), from the environment.
RUN_MARKED = set(filter(None, os.environ.get("FEDFOREST_DOCS_RUN_MARKED", "").split(",")))


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: str | None  # the marker's reason

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str | None:
        return RUN.get(self.lang)

    @property
    def runs(self) -> bool:
        """Run in this session: not marked, or asked for by FEDFOREST_DOCS_RUN_MARKED."""
        return self.skip is None or self.id in RUN_MARKED or self.page in RUN_MARKED


def parse(page: str) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a page and the problems of its docs-run markers."""
    lines = (ROOT / page).read_text().splitlines()
    blocks, problems, i = [], [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(```+)\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, lang = fence.group(1), fence.group(2), fence.group(3).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        code = "\n".join(line[len(indent) :] for line in lines[i + 1 : end]) + "\n"
        prev = i - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        skip = None
        marker = MARKER.match(lines[prev].strip()) if prev >= 0 else None
        if marker:
            reason = SKIP.match(marker.group(1))
            if reason is None or not reason.group(1).strip():
                problems.append(f"{page}:{prev + 1}: a docs-run marker needs 'skip (reason)'")
            else:
                skip = reason.group(1).strip()
        blocks.append(Block(page, i + 1, lang, code, skip))
        i = end + 1
    for n, line in enumerate(lines, 1):
        if MARKER.match(line.strip()) and not any(b.line > n for b in blocks):
            problems.append(f"{page}:{n}: a docs-run marker with no block after it")
    return blocks, problems


ALL = [b for page in PAGES for b in parse(page)[0]]
RUNNABLE = [b for b in ALL if b.kind is not None]


def test_pages_have_runnable_blocks():
    assert any(b.page == "README.md" for b in RUNNABLE)
    assert len({b.page for b in RUNNABLE}) >= 6


def test_markers_are_well_formed():
    problems = [p for page in PAGES for p in parse(page)[1]]
    assert not problems, "\n".join(problems)


def test_command_blocks_name_their_language():
    """A fence without a language is not run: it must not hold a command."""
    bare = [b.id for b in ALL if not b.lang and COMMANDS.match(b.code.lstrip())]
    assert not bare, f"blocks of commands with no language (```bash): {bare}"


# ---------------------------------------------------------------------------------- running
PIP_STANDIN = '''#!{python}
"""docs-run's pip: checks what `pip install -e .[extras]` would install, installs nothing."""
import importlib.metadata as md
import re
import sys
import tomllib

args = [a for a in sys.argv[1:] if a not in ("-e", "--editable", "-q", "--quiet")]
match = re.fullmatch(r"\\.(?:\\[([\\w,-]+)\\])?", args[1]) if len(args) == 2 else None
if args[:1] != ["install"] or match is None:
    sys.exit(f"docs-run pip stand-in: only 'pip install -e .[extras]', not {{sys.argv[1:]}}")
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = [e for e in (match.group(1) or "").split(",") if e]
wanted = list(project["dependencies"])
for extra in extras:
    if extra not in project["optional-dependencies"]:
        sys.exit(f"docs-run pip stand-in: pyproject.toml has no extra {{extra!r}}")
    wanted += project["optional-dependencies"][extra]
wrong = []
for requirement in wanted:
    name, _, version = requirement.split(";")[0].strip().partition("==")
    name = name.split("[")[0].strip()
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    if have != (version or have) or have is None:
        wrong.append(f"{{requirement}} (installed: {{have}})")
md.version(project["name"])
if wrong:
    sys.exit("docs-run pip stand-in: not installed as pinned: " + ", ".join(wrong))
print(f"docs-run: pip install not rerun; the {{len(wanted)}} pinned requirements of "
      f"{{project['name']}}[{{','.join(extras)}}] are installed")
'''

PYTHON_RUNNER = """
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
sys.path.insert(0, "")  # as `python` at the repository root: its fedforest/ first
for block in blocks:
    print(f"\\n===== docs-run {block['id']} =====", flush=True)
    try:
        # Padded so that tracebacks give the page's own line numbers.
        code = "\\n" * block["line"] + block["code"]
        exec(compile(code, block["page"], "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"===== docs-run FAILED {block['id']}", flush=True)
        sys.exit(1)
    print(f"===== docs-run DONE {block['id']}", flush=True)
"""


def _shell_script(blocks: list[Block]) -> str:
    parts = ["set -eo pipefail"]
    for b in blocks:
        parts.append(f"echo; echo '===== docs-run {b.id} ====='")
        parts.append(b.code.rstrip("\n"))
        parts.append(f"echo '===== docs-run DONE {b.id}'")
    return "\n".join(parts) + "\n"


def _copy_repository(dest: Path) -> None:
    # Tracked files and new ones not ignored: the working tree as it is (a fresh clone in CI).
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    _copy_kernel_cache(dest)


def _copy_kernel_cache(dest: Path) -> None:
    """numba's disk cache of fedforest's kernels as the working tree holds it, copied too.

    The copy's sources are the tree's, byte for byte and with their times (``copy2``): the
    cache's stamps match, so a page loads the kernels the session compiled instead of
    compiling each again in its copy (most of a page's time: docs/scale.md took 193 s, its
    blocks 10 s with a warm cache). A kernel not cached yet compiles as in a fresh clone.
    """
    for src in (ROOT / "fedforest").rglob("__pycache__/*.nb[ci]"):
        to = dest / src.relative_to(ROOT)
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, to)


def _run_group(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run in a new process group; kill whatever of the group is left when it ends."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timeout = page_timeout()
    try:
        out, _ = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code, out = -1, out + f"\n===== docs-run TIMEOUT after {timeout:.0f} s".encode()
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(1.0)
    return code, out.decode(errors="replace")


def run_page(page: str, work: Path) -> dict[str, dict[str, str]]:
    """Run a page's blocks; per block id: status ('passed', 'failed', 'not reached'), log."""
    results: dict[str, dict[str, str]] = {}
    for kind in ("python", "shell"):
        blocks = [b for b in parse(page)[0] if b.kind == kind and b.runs]
        if not blocks:
            continue
        repo = work / f"{kind}-repo"
        _copy_repository(repo)
        (repo / ".docs-run-tmp").mkdir()
        shim = work / f"{kind}-bin"
        shim.mkdir()
        (shim / "pip").write_text(PIP_STANDIN.format(python=sys.executable))
        (shim / "pip").chmod(0o755)
        env = {
            **os.environ,
            "PATH": f"{shim}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
            + os.environ.get("PATH", ""),
            "MPLBACKEND": "Agg",
            "TMPDIR": str(repo / ".docs-run-tmp"),
            "FLWR_TELEMETRY_ENABLED": "0",
            "PYTHONPATH": "",
        }
        if kind == "python":
            (work / "blocks.json").write_text(
                json.dumps(
                    [{"id": b.id, "page": b.page, "line": b.line, "code": b.code} for b in blocks]
                )
            )
            (work / "runner.py").write_text(PYTHON_RUNNER)
            argv = [sys.executable, str(work / "runner.py"), str(work / "blocks.json")]
        else:
            (work / "page.sh").write_text(_shell_script(blocks))
            argv = ["bash", str(work / "page.sh")]
        _, log = _run_group(argv, repo, env)
        for b in blocks:
            start = log.find(f"===== docs-run {b.id} =====")
            if start < 0:
                results[b.id] = {"status": "not reached", "log": ""}
                continue
            done = log.find(f"===== docs-run DONE {b.id}", start)
            section = log[start : None if done < 0 else done]
            results[b.id] = {"status": "passed" if done >= 0 else "failed", "log": section}
        leftover = repo / "flower-demo"
        if leftover.exists():
            results[blocks[-1].id] = {
                "status": "failed",
                "log": "the page left flower-demo/ in the repository",
            }
    return results


@pytest.fixture(scope="session")
def page_results(tmp_path_factory):
    """``page -> results``, each page run once per session across xdist workers."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = shared / "docs-run"
    shared.mkdir(exist_ok=True)

    def get(page: str) -> dict[str, dict[str, str]]:
        slug = re.sub(r"\W", "_", page)
        out = shared / f"{slug}.json"
        with open(shared / f"{slug}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not out.exists():
                work = shared / slug
                work.mkdir()
                try:
                    out.write_text(json.dumps(run_page(page, work)))
                finally:
                    shutil.rmtree(work, ignore_errors=True)
        return json.loads(out.read_text())

    return get


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_doc_block_runs(block, page_results):
    if not block.runs:
        pytest.skip(f"{block.id} is marked in the page: {block.skip}")
    result = page_results(block.page)[block.id]
    if result["status"] == "not reached":
        failed = [k for k, v in page_results(block.page).items() if v["status"] == "failed"]
        pytest.fail(f"{block.id} was not reached: an earlier block failed ({failed})")
    assert result["status"] == "passed", (
        f"{block.id} ({block.lang}) failed as written:\n" + textwrap.indent(result["log"], "  ")
    )
