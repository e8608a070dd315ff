"""Engine URLs (issue 27, items 6 and 15): http or https, a host, an explicit port,
nothing after the path — anything else is refused with the reason, never accepted and
then dialled."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.config import engine_url


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "https://engine.internal:443", "http://[::1]:9000",
                                 "http://h:8000/prefix/v2"])
def test_engine_urls_that_are_accepted(url: str) -> None:
    assert engine_url(url) == url


@pytest.mark.parametrize(("url", "why"), [
    ("file:///etc/passwd", "not file://"), ("unix:///run/engine.sock", "not unix://"),
    ("127.0.0.1:8000", "without a scheme"), ("http://127.0.0.1", "write the port out"),
    ("http://h:0", "port 0"), ("http://h:65536", "out of range"), ("http://:80", "no valid host"),
    ("http://a b:80", "no valid host"), ("http://u:p@h:80", "credentials"), ("http://h:80/#x", "fragment"),
    ("http://h:80/v1?key=1", "query"), ("http://h:80/a b", "unusual characters"),
])
def test_engine_urls_that_are_refused_say_why(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        engine_url(url)


@settings(max_examples=500, deadline=None)
@given(url=st.one_of(st.text(max_size=40), st.builds("{}://{}:{}{}".format, st.sampled_from(["http", "https", "ftp",
                                                                                                 "file", ""]),
                                                      st.text(max_size=12), st.integers(-5, 70000),
                                                      st.text(max_size=8))))
def test_fuzz_an_engine_url_is_accepted_whole_or_refused_with_a_value_error(url: str) -> None:
    try:
        out = engine_url(url)
    except ValueError as e:
        assert str(e).startswith(repr(url))
    else:
        parts = urlsplit(out)
        assert out == url and parts.scheme in ("http", "https") and parts.hostname and parts.port
