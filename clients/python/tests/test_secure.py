"""Tokens and TLS: a dev agent with --acl and HTTPS (its own CA)."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess

import pytest
from conftest import JOB_TIMEOUT, Agent, foreman_bin, make_root

from foreman import Client, ForbiddenError, ForemanConnectionError, UnauthorizedError


def cli(*args: str) -> dict:
    out = subprocess.run([foreman_bin(), *args, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"foreman {' '.join(args)}: {out.stderr}"
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def secure_agent():
    root = make_root("foreman-pytest-tls-")
    tls = os.path.join(root, "tls")
    os.mkdir(tls)
    cli("tls", "ca", "create", "--dir", tls)
    ca = os.path.join(tls, "foreman-ca.pem")
    cli("tls", "cert", "create", "--server", "--node", "py1", "--dir", tls, "--ca", ca, "--ca-key", os.path.join(tls, "foreman-ca-key.pem"))
    a = Agent(
        root,
        [
            "--default-driver", "process", "--acl",
            "--tls-cert", os.path.join(tls, "py1-server.pem"),
            "--tls-key", os.path.join(tls, "py1-server-key.pem"),
            "--tls-ca", ca,
        ],
        scheme="https",
    )
    a.ca = ca
    a.start()
    try:
        a.wait_ready(Client(a.url, ca_file=ca, token="", namespace=""))
        a.token = cli("acl", "bootstrap", "--addr", a.url, "--ca-cert", ca)["secret"]
        yield a
    finally:
        a.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_token_over_tls(secure_agent):
    c = Client(secure_agent.url, token=secure_agent.token, ca_file=secure_agent.ca, namespace="")
    job = c.wait(c.submit(["echo", "secret"]), timeout=JOB_TIMEOUT)
    assert job.succeeded and c.logs(job) == "secret\n"
    with c.events(job=job, after=0, timeout=JOB_TIMEOUT) as es:
        assert next(es).type == "job.submitted"


def test_no_token_is_unauthorized(secure_agent):
    c = Client(secure_agent.url, token="", ca_file=secure_agent.ca, namespace="")
    with pytest.raises(UnauthorizedError) as e:
        c.submit("true")
    assert (e.value.status, e.value.code) == (401, "unauthorized")


def test_role_without_permission_is_forbidden(secure_agent):
    a = secure_agent
    reader = cli("acl", "token", "create", "--role", "read:default", "--addr", a.url, "--ca-cert", a.ca, "--token", a.token)["secret"]
    c = Client(a.url, token=reader, ca_file=a.ca, namespace="")
    assert c.jobs().jobs is not None  # reading is allowed
    with pytest.raises(ForbiddenError) as e:
        c.submit("true")
    assert (e.value.status, e.value.code) == (403, "forbidden")
    assert "submit" in e.value.message


def test_ssl_context_and_untrusted_ca(secure_agent):
    a = secure_agent
    ctx = ssl.create_default_context(cafile=a.ca)
    assert Client(a.url, ssl_context=ctx, token=a.token, namespace="").ready()["status"] == "ready"
    # The system's roots do not know the cluster CA: refused at once, not retried.
    with pytest.raises(ForemanConnectionError) as e:
        Client(a.url, token=a.token, namespace="", ca_file=None).jobs()
    assert "TLS" in str(e.value)
