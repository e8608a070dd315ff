from flowserve.cache.prefix_index import PrefixIndex


def test_match_by_instance():
    idx = PrefixIndex(window_s=0)
    idx.add((1, 2, 3, 4, 5), "a", 0.0)
    idx.add((1, 2, 3, 9), "b", 1.0)
    total, per = idx.match_by_instance((1, 2, 3, 4, 7))
    assert total == 4
    assert per == {"a": 4, "b": 3}
    total, per = idx.match_by_instance((1, 2, 3, 9, 9))
    assert (total, per) == (4, {"a": 3, "b": 4})
    assert idx.match_by_instance((8,)) == (0, {})


def test_discard_suffix_keeps_prefix_and_collects_garbage():
    idx = PrefixIndex(window_s=0)
    idx.add((1, 2, 3, 4, 5, 6), "a", 0.0)
    idx.add((1, 2, 3), "b", 0.0)
    idx.discard("a", (1, 2, 3, 4, 5, 6), 2)  # a evicted tokens[2:]
    _, per = idx.match_by_instance((1, 2, 3, 4, 5, 6))
    assert per == {"a": 2, "b": 3}
    # the node (4, 5, 6) is held by nobody and was removed
    assert idx.size == 3
    idx.discard("b", (1, 2, 3), 0)
    idx.discard("a", (1, 2), 0)
    assert idx.size == 0 and len(idx) == 0


def test_discard_mid_edge_splits_exactly():
    idx = PrefixIndex(window_s=0)
    idx.add(tuple(range(10)), "a", 0.0)
    idx.add(tuple(range(10)), "b", 0.0)
    idx.discard("a", tuple(range(10)), 6)
    _, per = idx.match_by_instance(tuple(range(10)))
    assert per == {"a": 6, "b": 10}
    assert idx.size == 10


def test_remove_instance():
    idx = PrefixIndex(window_s=0)
    idx.add((1, 2), "a", 0.0)
    idx.add((1, 3), "b", 0.0)
    idx.remove_instance("a")
    assert idx.match_by_instance((1, 2)) == (1, {"b": 1})
    assert idx.size == 2
