"""`api_keys` as tenants (issue 35): both forms, their errors, and what a key may act for;
a fuzz test over the parser."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.errors import ConfigError
from flowserve.host.settings import serve_config
from flowserve.tenants import ApiKeys, KeyGrant, api_keys, tenant_name_problem

INSTANCES = [{"name": "sim", "gpu": "A100-80G", "model": "llama-3.1-8b"}]


def test_a_plain_list_names_each_key_by_its_position() -> None:
    keys = api_keys(["sk-a", "sk-b"])
    assert keys.keys == ("sk-a", "sk-b") and keys.listed
    assert keys.grant("sk-b") == KeyGrant("key-2") and keys.grant("sk-c") is None and keys.grant("") is None


def test_a_mapping_names_tenants_and_whom_a_key_acts_for() -> None:
    keys = api_keys({"sk-a": "alice", "sk-a2": "alice", "sk-p": {"tenant": "shop", "acts_for": ["shop/*", "x"]},
                     "sk-ops": {"tenant": "ops", "acts_for": ["*"]}})
    assert not keys.listed and keys.grant("sk-a2") == KeyGrant("alice")
    shop = keys.grant("sk-p")
    assert shop is not None and shop.tenant == "shop"
    assert [shop.may_act_for(t) for t in ("shop", "shop/u1", "shop/", "x", "xy", "alice", "sho")] == \
        [True, True, True, True, False, False, False]
    ops = keys.grant("sk-ops")
    assert ops is not None and ops.may_act_for("anyone")
    assert not ApiKeys() and api_keys(None) == ApiKeys() and api_keys([]) == ApiKeys(listed=True)


@pytest.mark.parametrize(("value", "message"), [
    (["sk-a", "sk-a"], "item 2: the same key is listed twice"),
    (["sk a"], "item 1: a key holds only visible ASCII"),
    ([""], "item 1: a key must be a non-empty string"),
    ([5], "item 1: a key must be a non-empty string"),
    ({"sk-a": "two words"}, "key 1.tenant: only visible ASCII"),
    ({"sk-a": "other"}, "'other' is reserved"),
    ({"sk-a": {"tenant": "t", "acts_for": "x"}}, "key 1.acts_for: expected a list"),
    ({"sk-a": {"tenant": "t", "acts_for": ["ok", "a b*"]}}, "key 1.acts_for[1]: only visible ASCII"),
    ({"sk-a": {"tenant": "t", "admin": True}}, "key 1: unknown field 'admin'"),
    ({"sk-a": {"acts_for": []}}, "key 1.tenant: required field is missing"),
    ({"sk-a": 5}, "key 1: expected a tenant name"),
    ("sk-a", "expected a list of keys or a mapping"),
])
def test_bad_api_keys_are_refused_by_position_without_printing_the_key(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match="api_keys") as err:
        serve_config({"instances": INSTANCES, "api_keys": value}, "cfg.yaml")
    assert message in str(err.value)
    if isinstance(value, dict):
        assert "sk-a" not in str(err.value)


def test_admin_keys_follow_the_form_of_the_api_keys() -> None:
    listed = serve_config({"instances": INSTANCES, "api_keys": ["k"]}, "t")
    assert listed.api_keys == ("k",) and listed.admin_keys == ("k",) and not listed.admin_closed
    named = serve_config({"instances": INSTANCES, "api_keys": {"k": "acme"}}, "t")
    assert named.admin_keys == () and named.admin_closed
    ops = serve_config({"instances": INSTANCES, "api_keys": {"k": "acme"}, "gateway": {"admin_keys": ["op"]}}, "t")
    assert ops.admin_keys == ("op",) and not ops.admin_closed
    assert not serve_config({"instances": INSTANCES}, "t").admin_closed  # no keys at all: open
    with pytest.raises(ConfigError, match="admin_keys: item 1"):
        serve_config({"instances": INSTANCES, "gateway": {"admin_keys": ["two words"]}}, "t")


names = st.text(alphabet=string.printable + "éß\x00\u2028", max_size=140)
grants = st.one_of(names, st.integers(), st.none(), st.fixed_dictionaries(
    {}, optional={"tenant": st.one_of(names, st.integers()), "acts_for": st.one_of(st.lists(names, max_size=4),
                                                                                   names),
                  "extra": st.booleans()}))
key_values = st.one_of(st.lists(st.one_of(names, st.integers()), max_size=5),
                       st.dictionaries(names, grants, max_size=5), names, st.integers(), st.none())


@settings(max_examples=300, deadline=None)
@given(key_values, names)
def test_any_api_keys_value_is_keys_or_one_clear_error(value: object, tenant: str) -> None:
    try:
        keys = api_keys(value)
    except ValueError as e:
        assert str(e) and "\n" not in str(e)
        return
    for key, grant in keys.grants:
        assert keys.grant(key) is not None
        assert tenant_name_problem(grant.tenant) is None and grant.may_act_for(grant.tenant)
        assert grant.may_act_for(tenant) in (True, False)
