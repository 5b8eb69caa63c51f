"""`--address` where no Ray answers: refused in seconds, with the reason, instead of Ray retrying for minutes.

Real sockets on this machine (a port just freed, a listening one); no Ray runtime.
"""

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raytrain.config.cluster import check_hostname_or_ip
from raytrain.ray_session import address_malformed, gcs_unreachable

from ..ports import refused_port


def test_a_port_nobody_listens_on_is_named_with_the_address_ray_would_use():
    with refused_port() as port:
        problem = gcs_unreachable(f"127.0.0.1:{port}")
    assert problem is not None and problem.startswith("nothing answers at ") and f":{port} (" in problem
    assert "Connection refused" in problem


def test_a_listening_port_passes():
    with socket.socket() as server:
        server.bind(("0.0.0.0", 0))
        server.listen()
        assert gcs_unreachable(f"127.0.0.1:{server.getsockname()[1]}") is None


@pytest.mark.parametrize("address", ["local", "ray://head:10001"])
def test_a_local_ray_and_ray_client_addresses_are_left_to_ray(address):
    assert gcs_unreachable(address) is None


@pytest.mark.parametrize(("address", "said"), [
    ("head", "not HOST:PORT"),
    ("127.0.0.1:0", "the port '0' is not a number from 1 to 65535"),
    ("127.0.0.1:65536", "the port '65536' is not a number from 1 to 65535"),
    ("127.0.0.1:٣", "the port '٣' is not a number"),  # an Arabic-Indic 3: str.isdigit() and int() take it
    ("127.0.0.1:1;reboot", "the port '1;reboot' is not a number"),
    ("$(reboot):6379", "the host '$(reboot)' is not an IP address or a hostname"),
    ("a b:6379", "the host 'a b' is not an IP address or a hostname"),
    ("10.0.0.5:6379\n", "the port '6379\\n' is not a number"),
])
def test_hostile_or_malformed_addresses_are_refused_as_they_were_typed(address, said):
    assert said in (gcs_unreachable(address, timeout_s=1) or "")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=12))
def test_any_port_text_is_refused_unless_it_is_a_port_number(port):
    problem = gcs_unreachable(f"127.0.0.1:{port}", timeout_s=0.5)
    if port.isascii() and port.isdigit() and 1 <= int(port) <= 65535:
        assert problem is None or problem.startswith("nothing answers at ")
    elif ":" not in port:  # with a colon the host part changes, and the result is one of the refusals
        assert problem == f"the port {port!r} is not a number from 1 to 65535"
    else:
        assert problem is not None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), st.one_of(st.just("6379"), st.text(max_size=6)))
def test_an_address_taken_as_typed_is_a_hostname_or_an_ip_address_and_a_port(host, port):
    """Checked before anything resolves or connects to it: no shell or control character gets through."""
    address = f"{host}:{port}"
    if address_malformed(address) is None:
        host = host.removeprefix("ray://")
        assert not set(address) & set(";&|$`'\"\\ <>(){}*?!#~\t\r\n\x00")
        assert port.isascii() and port.isdigit() and 1 <= int(port) <= 65535
        check_hostname_or_ip(host[1:-1] if host.startswith("[") else host)  # raises where it is neither


@pytest.mark.parametrize("address", ["10.0.0.5:6379", "head-1.lab:6379", "[2001:db8::1]:6379", "auto", "local",
                                     "ray://head:10001"])
def test_addresses_ray_takes_are_not_malformed(address):
    assert address_malformed(address) is None


def test_a_ray_client_address_is_checked_as_well():
    assert address_malformed("ray://$(reboot):10001") == "the host '$(reboot)' is not an IP address or a hostname"


def test_a_malformed_address_is_refused_where_a_command_takes_it_before_its_other_checks(monkeypatch):
    """`cluster_address` runs first in `train`, `tune`, `tune resume` and `run`: a malformed `--address` or
    RAY_ADDRESS is exit 2 there, before RLlib's config checks, --dry-run or not."""
    from raytrain.errors import RayAddressError
    from raytrain.ray_session import cluster_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(RayAddressError, match="the port '70000' is not a number from 1 to 65535"):
        cluster_address("10.0.0.5:70000", None)
    monkeypatch.setenv("RAY_ADDRESS", "head;6379")
    with pytest.raises(RayAddressError) as raised:
        cluster_address(None, None)
    assert "(from RAY_ADDRESS)" in str(raised.value)
    assert cluster_address("10.0.0.5:6379", None) == "10.0.0.5:6379"  # the flag wins over RAY_ADDRESS, as in Ray
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert cluster_address(None, None) is None  # a well-formed RAY_ADDRESS is read where Ray is joined
