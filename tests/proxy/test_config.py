"""ProxyConfig and Upstream validation: each error names the option."""

from __future__ import annotations

import pytest

from agent.proxy.config import ProxyConfig, ProxyConfigError, Upstream


def test_pool_names_give_the_lookahead():
    assert Upstream.parse("k4=http://127.0.0.1:8081").lookahead == 4
    assert Upstream.parse("off=http://h:1/").lookahead == 0


@pytest.mark.parametrize("text, message", [("k4", "NAME=URL"), ("k0=http://h:1", "off or kN"),
                                           ("fast=http://h:1", "off or kN"), ("k4=ftp://h", "URL"),
                                           ("k4=http://h:1/v1", "without a path")])
def test_bad_upstreams(text, message):
    with pytest.raises(ProxyConfigError, match=message):
        Upstream.parse(text)


def test_config_checks():
    up = Upstream.parse("k4=http://h:1")
    with pytest.raises(ProxyConfigError, match="upstream: give at least one"):
        ProxyConfig(())
    with pytest.raises(ProxyConfigError, match="given twice"):
        ProxyConfig((up, up))
    with pytest.raises(ProxyConfigError, match="health_seconds"):
        ProxyConfig((up,), health_seconds=0)
    with pytest.raises(ProxyConfigError, match="kmax"):
        ProxyConfig((Upstream.parse("k12=http://h:1"),))
    with pytest.raises(ProxyConfigError, match="admin_port: must be an integer in 0..65535"):
        ProxyConfig((up,), admin_port=65536)
    with pytest.raises(ProxyConfigError, match="admin_host: must be non-empty"):
        ProxyConfig((up,), admin_host=" ")
    assert (ProxyConfig((up,)).admin_host, ProxyConfig((up,)).admin_port) == ("127.0.0.1", 8789)


def test_the_default_pool_must_be_one_of_the_pools():
    pools = (Upstream.parse("k4=http://h:1"), Upstream.parse("off=http://h:2"))
    assert ProxyConfig(pools, default_pool="k4").default_pool == "k4"
    with pytest.raises(ProxyConfigError, match=r"default_pool: no pool named 'k8' \(pools: k4, off\)"):
        ProxyConfig(pools, default_pool="k8")
