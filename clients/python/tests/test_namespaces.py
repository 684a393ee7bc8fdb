"""Namespace shares: set one, read the fair-share view, a bad share is
refused naming the field and changes nothing."""

import pytest

from foreman import Client, InvalidError


def test_namespace_shares(client: Client):
    client.set_namespace("py-research", share=3)
    client.set_namespace("py-build", share=1)
    shares = client.namespace_shares()
    assert shares.enabled
    assert shares.half_life_seconds > 0
    by_name = {n.name: n for n in shares.namespaces}
    assert by_name["py-research"].share == 3
    assert by_name["py-build"].share == 1
    assert by_name["py-research"].normalized > by_name["py-build"].normalized


def test_bad_share_names_the_field(client: Client):
    client.set_namespace("py-bad", share=2)
    with pytest.raises(InvalidError) as e:
        client.set_namespace("py-bad", share=0)
    assert "share" in str(e.value)
    by_name = {n.name: n for n in client.namespace_shares().namespaces}
    assert by_name["py-bad"].share == 2
