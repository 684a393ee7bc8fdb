"""The README's Python example runs as written against the test agent."""

from __future__ import annotations

import re

from conftest import REPO


def readme_example() -> str:
    """The first ```python block under the README's "## Python" heading."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^## Python\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "README.md has no '## Python' section"
    block = re.search(r"^```python\n(.*?)^```", m.group(1), re.S | re.M)
    assert block, "the README's Python section has no ```python block"
    return block.group(1)


def test_readme_example_runs(agent, monkeypatch, capsys):
    monkeypatch.setenv("FOREMAN_ADDR", agent.url)
    for v in ("FOREMAN_TOKEN", "FOREMAN_NAMESPACE", "FOREMAN_CACERT"):
        monkeypatch.delenv(v, raising=False)
    exec(compile(readme_example(), "README.md (Python)", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.splitlines()
    assert out == [f"rank 0/2 epoch {e} loss {1 / (e + 1):.3f}" for e in range(3)] + ["succeeded"], out
