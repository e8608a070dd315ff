"""Routed prompts as chained block hashes: a receiver rebuilds the prefix from the blocks
it knows, entries carry only blocks not sent lately, and nothing wrong gets through."""

from __future__ import annotations

import pytest

from flowserve.replicas.blocks import BLOCK, BlockBook, RouteDecoder, RouteEncoder, block_hashes, chained


def test_hashes_chain_so_a_hash_names_its_whole_prefix() -> None:
    a = tuple(range(40))
    b = (*range(16), *range(100, 124))  # the same first block, then different
    ha, hb = block_hashes(a), block_hashes(b)
    assert len(ha) == 3 and ha[0] == hb[0] and ha[1] != hb[1]
    assert ha[1] == chained(ha[0], a[16:32]) and ha[2] == chained(ha[1], a[32:40])  # the last block is short
    assert block_hashes(a) == ha  # deterministic
    assert block_hashes(()) == []


def test_an_entry_carries_new_blocks_once_and_a_peer_rebuilds_the_prompt() -> None:
    sender = RouteEncoder("r1", BlockBook(), republish_s=60.0)
    receiver = RouteDecoder(BlockBook())
    system = tuple(range(1000, 1064))  # 4 blocks shared by every call
    first = sender.entry("a", (*system, 1, 2, 3), now=0.0)
    assert first is not None and [i for i, _ in first.blocks] == [0, 1, 2, 3, 4]
    assert receiver.tokens(first) == (*system, 1, 2, 3)
    second = sender.entry("b", (*system, 7, 8), now=1.0)
    assert second is not None and [i for i, _ in second.blocks] == [4]  # only the new tail
    assert receiver.tokens(second) == (*system, 7, 8)
    later = sender.entry("a", system, now=100.0)  # past republish_s: carried again
    assert later is not None and len(later.blocks) == 4


def test_a_late_joiner_rebuilds_only_what_it_learned_and_counts_the_rest() -> None:
    sender = RouteEncoder("r1", BlockBook())
    system = tuple(range(64))
    sender.entry("a", (*system, 5), now=0.0)  # the late joiner missed this one
    book = BlockBook()
    late = RouteDecoder(book)
    entry = sender.entry("a", (*system, 5, 6), now=1.0)
    assert entry is not None and late.tokens(entry) == () and late.unknown_blocks == 5
    own = RouteEncoder("r2", book)  # its own prompt with the same system prompt teaches it those blocks
    own.entry("b", (*system, 9), now=2.0)
    assert late.tokens(entry) == (*system, 5, 6)  # the shared blocks, and the tail the entry carried


def test_a_block_that_does_not_hash_to_its_name_is_refused() -> None:
    sender = RouteEncoder("r1", BlockBook())
    e = sender.entry("a", tuple(range(20)), now=0.0)
    assert e is not None
    forged = type(e)(e.replica, e.instance, e.time, e.hashes, ((0, tuple(range(1, 17))), e.blocks[1]))
    with pytest.raises(ValueError, match="does not hash"):
        RouteDecoder(BlockBook()).tokens(forged)


def test_books_are_bounded_least_recently_used_first() -> None:
    book = BlockBook(capacity=3)
    for h in range(5):
        book.learn(h, 0, (h,) * BLOCK)
    assert len(book) == 3 and 0 not in book and 4 in book
    book.get(2)
    book.learn(9, 0, (9,))
    assert 2 in book and 3 not in book
