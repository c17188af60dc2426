"""The README's Python examples run as written (docs that match the code)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write model.ffm
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    assert (tmp_path / "model.ffm").exists()


def test_documentation_lists_name_every_page():
    """The README's "Documentation" list and docs/architecture.md's "The documentation"
    link every page of docs/ (results.md and swarm.md were missing from the README's)."""
    pages = {p.name for p in (README.parent / "docs").glob("*.md")}
    readme = README.read_text().split("## Documentation", 1)[1]
    assert pages == set(re.findall(r"^- \[docs/([\w-]+\.md)\]", readme, re.M))
    own = (README.parent / "docs" / "architecture.md").read_text()
    own = own.split("## The documentation", 1)[1]
    assert pages == set(re.findall(r"^- \[([\w-]+\.md)\]", own, re.M))
