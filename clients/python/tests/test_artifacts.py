"""Artifacts: listed, read and downloaded keeping their paths."""

from __future__ import annotations

import os

import pytest
from conftest import JOB_TIMEOUT

from foreman import Client, NotFoundError


def test_list_read_download(client: Client, tmp_path):
    sub = client.submit(
        ["sh", "-c", 'mkdir -p "$FOREMAN_ARTIFACTS/out" && printf "a,b\\n1,2\\n" > "$FOREMAN_ARTIFACTS/out/data.csv" && echo done > "$FOREMAN_ARTIFACTS/log.txt"']
    )
    assert client.wait(sub, timeout=JOB_TIMEOUT).succeeded
    listing = client.artifacts.list(sub)
    assert [(a.path, a.size) for a in listing.artifacts] == [("log.txt", 5), ("out/data.csv", 8)]
    assert listing.attempt == 1 and listing.total_bytes == 13
    assert client.artifacts.read(sub, "out/data.csv") == b"a,b\n1,2\n"

    paths = client.artifacts.download(sub, str(tmp_path))
    assert sorted(os.path.relpath(p, tmp_path) for p in paths) == ["log.txt", os.path.join("out", "data.csv")]
    assert (tmp_path / "out" / "data.csv").read_bytes() == b"a,b\n1,2\n"

    one = client.artifacts.download(sub, str(tmp_path / "one"), path="log.txt")
    assert [os.path.basename(p) for p in one] == ["log.txt"]
    with pytest.raises(NotFoundError):
        client.artifacts.download(sub, str(tmp_path), path="missing.txt")
