"""Join by QR code, its parts: which addresses visitors are given, and what the projection page says. (The code
printed by `./run.sh` and the page served are read back in `tests/test_start_commands.py`.)"""

from __future__ import annotations

import ipaddress
import re

import pytest

from web.join import addresses, projection

pytestmark = pytest.mark.fast


def test_an_app_on_this_machine_only_gives_visitors_no_address():
    assert addresses("127.0.0.1", 8000) == addresses("localhost", 8000) == addresses("::1", 8000) == []


def test_an_app_on_one_address_gives_that_one_and_on_every_network_this_machines_own():
    assert addresses("10.0.0.5", 9000) == ["http://10.0.0.5:9000"]
    every = addresses("0.0.0.0", 8000)
    hosts = [ipaddress.ip_address(re.match(r"http://(.*):8000$", url).group(1)) for url in every]
    assert hosts and not any(host.is_loopback for host in hosts)
    assert [host.is_private for host in hosts] == sorted((host.is_private for host in hosts), reverse=True)


def test_the_projection_page_shows_the_address_and_says_when_visitors_need_an_account():
    url = "http://192.168.1.20:8000"
    open_page, login_page = projection([url], logins=False), projection([url], logins=True)
    assert f"data-join-address>{url}<" in open_page and "data-join-logins" not in open_page
    assert "data-join-logins" in login_page and "需要账号" in login_page
    assert "CHAT_HOST=0.0.0.0" in projection([], logins=False)
