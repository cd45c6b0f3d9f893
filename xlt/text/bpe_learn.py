"""fastBPE's ``learnbpe`` and ``getvocab`` in-process, byte for byte (no compiled tool needed).

``fast learnbpe`` merges the most frequent pair of tokens and breaks ties by the smaller pair of
token ids. Ids are handed out while iterating over the corpus's words, which fastBPE keeps in a
libstdc++ ``std::unordered_map<std::string, uint32_t>``, so the codes depend on that map's
iteration order. :func:`unordered_map_order` reproduces it: libstdc++'s string hash
(``std::_Hash_bytes``, a MurmurHash2 variant), its prime bucket counts and the way its rehash and
insert splice nodes into the one linked list that iteration walks. This is libstdc++ as of GCC 12,
i.e. a Linux build of fastBPE (a build against libc++ breaks ties its own way); the tests compare
against the `fast` tool that ``make install`` compiles.

The merge loop is fastBPE's: pair counts are updated incrementally around each merged occurrence
(the same deltas, in the words that contain the pair), and the best pair comes from a heap with
lazy deletion instead of fastBPE's scan over all pairs, which is too slow in Python.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from typing import Iterable, Iterator

import numpy as np

END_WORD = "</w>"

# libstdc++'s __prime_list (src/shared/hashtable-aux.cc), up to 2^32: bucket counts of a growing
# unordered_map. Bigger tables would need more than 4e9 distinct words.
_PRIMES = np.array([int(p) for p in """
    2 3 5 7 11 13 17 19 23 29 31 37 41 43 47 53 59 61 67 71 73 79 83 89 97 103 109 113 127 137 139 149
    157 167 179 193 199 211 227 241 257 277 293 313 337 359 383 409 439 467 503 541 577 619 661 709 761
    823 887 953 1031 1109 1193 1289 1381 1493 1613 1741 1879 2029 2179 2357 2549 2753 2971 3209 3469 3739
    4027 4349 4703 5087 5503 5953 6427 6949 7517 8123 8783 9497 10273 11113 12011 12983 14033 15173 16411
    17749 19183 20753 22447 24281 26267 28411 30727 33223 35933 38873 42043 45481 49201 53201 57557 62233
    67307 72817 78779 85229 92203 99733 107897 116731 126271 136607 147793 159871 172933 187091 202409
    218971 236897 256279 277261 299951 324503 351061 379787 410857 444487 480881 520241 562841 608903
    658753 712697 771049 834181 902483 976369 1056323 1142821 1236397 1337629 1447153 1565659 1693859
    1832561 1982627 2144977 2320627 2510653 2716249 2938679 3179303 3439651 3721303 4026031 4355707
    4712381 5098259 5515729 5967347 6456007 6984629 7556579 8175383 8844859 9569143 10352717 11200489
    12117689 13109983 14183539 15345007 16601593 17961079 19431899 21023161 22744717 24607243 26622317
    28802401 31160981 33712729 36473443 39460231 42691603 46187573 49969847 54061849 58488943 63278561
    68460391 74066549 80131819 86693767 93793069 101473717 109783337 118773397 128499677 139022417
    150406843 162723577 176048909 190465427 206062531 222936881 241193053 260944219 282312799 305431229
    330442829 357502601 386778277 418451333 452718089 489790921 529899637 573292817 620239453 671030513
    725980837 785430967 849749479 919334987 994618837 1076067617 1164186217 1259520799 1362662261
    1474249943 1594975441 1725587117 1866894511 2019773507 2185171673 2364114217 2557710269 2767159799
    2993761039 3238918481 3504151727 3791104843 4101556399 4294967291""".split()], dtype=np.uint64)
_FAST_BUCKETS = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)  # _Prime_rehash_policy::_M_next_bkt
_MUL = np.uint64(0xC6A4A7935BD1E995)
_SEED = 0xC70F6907  # std::hash<std::string>'s seed for _Hash_bytes


# ---- libstdc++'s unordered_map<string, ...> ---------------------------------------------------
def string_hashes(words: list[bytes]) -> np.ndarray:
    """``std::hash<std::string>`` (64-bit libstdc++) of every word, vectorised over the words."""
    n = len(words)
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=n)
    buf = np.frombuffer(b"".join(words) + bytes(8), dtype=np.uint8)  # padded: 8-byte loads never overrun
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    eight = np.arange(8)

    def load(at: np.ndarray) -> np.ndarray:  # little-endian 8-byte loads at byte offsets
        return np.ascontiguousarray(buf[at[:, None] + eight]).view("<u8").ravel()

    def shift_mix(v: np.ndarray) -> np.ndarray:
        return v ^ (v >> np.uint64(47))

    with np.errstate(over="ignore"):  # every product is meant modulo 2^64
        h = np.uint64(_SEED) ^ (lengths.astype(np.uint64) * _MUL)
        by_length = np.argsort(-lengths, kind="stable")  # words with an 8-byte block j are a prefix
        blocks = lengths[by_length] // 8
        for j in range(int(blocks[0]) if n else 0):
            rows = by_length[:np.searchsorted(-blocks, -j, side="left")]
            data = shift_mix(load(starts[rows] + 8 * j) * _MUL) * _MUL
            h[rows] = (h[rows] ^ data) * _MUL
        tail = lengths % 8
        rows = np.flatnonzero(tail)
        if rows.size:
            mask = (np.uint64(1) << (np.uint64(8) * tail[rows].astype(np.uint64))) - np.uint64(1)
            h[rows] = (h[rows] ^ (load(starts[rows] + lengths[rows] - tail[rows]) & mask)) * _MUL
        h = shift_mix(shift_mix(h) * _MUL)
    return h


def _next_bucket_count(n: int) -> int:
    if n < len(_FAST_BUCKETS):
        return _FAST_BUCKETS[n]
    return int(_PRIMES[np.searchsorted(_PRIMES[6:], n) + 6])  # lower_bound from __prime_list + 6


def unordered_map_order(hashes: np.ndarray) -> np.ndarray:
    """Iteration order of a libstdc++ unordered_map whose keys, with these hashes, were inserted in order.

    The map is one singly linked list. A node goes to the front of its bucket's run of nodes, or,
    when its bucket is empty, to the front of the whole list; a rehash re-inserts the nodes in list
    order the same way. So the list is the buckets ordered by when each got its first node (latest
    first), each bucket's nodes latest first, where "when" counts from the last rehash, which
    first re-inserts the old list. The table grows from 13 buckets when an insert would make
    the element count exceed the bucket count (max_load_factor 1).
    """
    n = len(hashes)
    order = np.zeros(0, dtype=np.int64)
    buckets, start = _next_bucket_count(12), 0  # the first insert: max(1, 11) + 1 -> 13 buckets
    while start < n:
        stop = min(n, buckets)  # inserting element number `buckets` rehashes first
        sequence = np.concatenate([order, np.arange(start, stop)])
        bucket = hashes[sequence] % np.uint64(buckets)
        _, first, inverse = np.unique(bucket, return_index=True, return_inverse=True)
        time = np.arange(len(sequence))
        order = sequence[np.lexsort((-time, -first[inverse.ravel()]))]
        start = stop
        buckets = _next_bucket_count(max(stop + 1, 2 * buckets))
    return order


# ---- words -----------------------------------------------------------------------------------
def count_words(blocks: Iterable[bytes]) -> Counter:
    """Word counts in order of first occurrence; words are runs of bytes between ' ' and '\\n' (fastBPE's)."""
    counts: Counter = Counter()
    for block in blocks:
        counts.update(block.replace(b"\n", b" ").split(b" "))
    counts.pop(b"", None)  # empty pieces between separators; deleting keeps the others' order
    return counts


def sorted_vocabulary(counts: Counter) -> list[tuple[bytes, int]]:
    """``fast getvocab``'s order: most frequent first, ties by bytes (its std::set's comparison)."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def vocabulary_lines(counts: Counter) -> Iterator[bytes]:
    """``fast getvocab``'s output: ``token count`` lines."""
    for word, count in sorted_vocabulary(counts):
        yield b"%s %d\n" % (word, count)


def characters(word: str) -> list[str]:
    """fastBPE's split of a word into characters, the last one marked with ``</w>``.

    fastBPE scans a C string: a NUL ends the scan, and the rest of the word joins the character
    before it (or is the whole word when it starts the word).
    """
    nul = word.find("\0")
    if nul == 0:
        return [word + END_WORD]
    head = word if nul < 0 else word[:nul]
    pieces = list(head)
    pieces[-1] += word[len(head):] + END_WORD
    return pieces


# ---- learning --------------------------------------------------------------------------------
def _tokenize(counts: Counter) -> tuple[list[str], list[list[int]], list[int]]:
    """fastBPE's ``tokenize``: token strings (ids in order of first use) and every word's ids and count.

    Words are visited in the unordered_map's order, which is what makes fastBPE's ids, and so its
    tie-breaking, what they are.
    """
    words_in_order = list(counts)
    token_id: dict[str, int] = {}
    words, freq = [], []
    for index in unordered_map_order(string_hashes(words_in_order)).tolist():
        word = words_in_order[index]
        words.append([token_id.setdefault(piece, len(token_id)) for piece in characters(word.decode("utf-8"))])
        freq.append(counts[word])
    return list(token_id), words, freq


def _count_pairs(words: list[list[int]], freq: list[int]) -> tuple[dict[int, int], dict[int, int], np.ndarray, np.ndarray]:
    """Every adjacent pair's count, and for each pair the words it occurs in, vectorised.

    A pair (a, b) is the int ``a << 32 | b``, which orders like fastBPE's
    ``std::pair<uint32_t, uint32_t>``. Returns (count by pair, row by pair, word indices grouped by
    row, where each row's group starts): a pair's word list is built only if it is merged.
    """
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    flat = np.fromiter(itertools.chain.from_iterable(words), dtype=np.int64, count=int(lengths.sum()))
    word_of = np.repeat(np.arange(len(words)), lengths)
    inside = np.ones(len(flat), dtype=bool)  # position i starts a pair unless it ends its word
    inside[np.cumsum(lengths) - 1] = False
    left = np.flatnonzero(inside)
    if not left.size:  # every word is one character
        return {}, {}, np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    keys = flat[left] << 32 | flat[left + 1]
    word_of = word_of[left]
    pairs, row_of = np.unique(keys, return_inverse=True)
    row_of = row_of.ravel()
    totals = np.bincount(row_of, weights=np.asarray(freq, dtype=np.float64)[word_of], minlength=len(pairs))
    by_row = np.lexsort((word_of, row_of))
    grouped = np.stack([row_of[by_row], word_of[by_row]], axis=1)
    grouped = grouped[np.r_[True, (np.diff(grouped, axis=0) != 0).any(axis=1)]]  # a word once per pair
    starts = np.searchsorted(grouped[:, 0], np.arange(len(pairs) + 1))
    key_list = pairs.tolist()
    return (dict(zip(key_list, totals.astype(np.int64).tolist())), dict(zip(key_list, range(len(key_list)))),
            grouped[:, 1], starts)


def learn_merges(counts: Counter, merges: int) -> Iterator[tuple[str, str, int]]:
    """fastBPE's merges (left, right, count) of a word count, stopping when no pair is left.

    ``counts`` must be in the order in which fastBPE read the words (:func:`count_words`).
    """
    tokens, words, freq = _tokenize(counts)
    pair_count, initial_row, initial_words, starts = _count_pairs(words, freq)
    added: dict[int, list[int]] = {}  # words of the pairs made by merges (a superset, like fastBPE's)
    heap = [(-c, key) for key, c in pair_count.items()]
    heapq.heapify(heap)

    for _ in range(merges):
        while heap and pair_count[heap[0][1]] != -heap[0][0]:
            heapq.heappop(heap)  # stale: the pair's count changed after this entry was pushed
        if not heap:
            return
        best, key = heapq.heappop(heap)
        a, b = key >> 32, key & 0xFFFFFFFF
        yield tokens[a], tokens[b], -best
        new = len(tokens)
        tokens.append(tokens[a] + tokens[b])
        row = initial_row.get(key)
        candidates = initial_words[starts[row]:starts[row + 1]].tolist() if row is not None else added.pop(key)
        delta: dict[int, int] = {}
        change = delta.get
        for wi in candidates:
            ids = words[wi]
            occurrences = ids.count(a)
            if not occurrences:
                continue
            c = freq[wi]
            j = -1
            for _ in range(occurrences):  # in order; a merged (a, a) uses up the next one
                try:
                    j = ids.index(a, j + 1)
                except ValueError:
                    break
                if j + 1 == len(ids) or ids[j + 1] != b:
                    continue
                # fastBPE's change_count around the occurrence: the tokens before and after it
                # now pair with the new token instead
                if j:
                    prev = ids[j - 1] << 32
                    delta[prev | a] = change(prev | a, 0) - c
                    delta[prev | new] = change(prev | new, 0) + c
                    added.setdefault(prev | new, []).append(wi)
                if j + 2 < len(ids):
                    nxt = ids[j + 2]
                    delta[b << 32 | nxt] = change(b << 32 | nxt, 0) - c
                    delta[new << 32 | nxt] = change(new << 32 | nxt, 0) + c
                    added.setdefault(new << 32 | nxt, []).append(wi)
                ids[j:j + 2] = (new,)
        pair_count[key] = 0
        for k, d in delta.items():
            if d and k != key:
                c = pair_count.get(k, 0) + d
                pair_count[k] = c
                if c > 0:
                    heapq.heappush(heap, (-c, k))
