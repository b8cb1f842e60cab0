#!/usr/bin/python3
"""The SPARK localizer as a Python team would write it with Debian's packages: the peer spark is measured against
(bench/peers.sh, docs/PERFORMANCE.md "Against the peers (Python)"). Not shipped.

  localizer_peer.py import KB CASES.jsonl...      cases into KB/cases.sqlite (test files stored once per version)
  localizer_peer.py index KB                      features, document frequencies, a FAISS index (flat / HNSW)
  localizer_peer.py localize KB --test PATH --error FILE --test-id ID [-k 5]     one failure, JSON on stdout
  localizer_peer.py loo KB                        leave-one-out: each case's retrieved case (JSON Lines)
  localizer_peer.py warm KB QUERIES.jsonl         localize each query in this process: p50 / p95 ms

The features are spark's built-in ones (src/retrieval/embedder.cpp), so that retrieval can agree with spark's: three
hashed TF-IDF blocks (error message: words, word bigrams, character 4-grams; the failing test's own function: words;
the whole test code: words), FNV-1a 64 hashes with spark's seeds, sublinear tf, smoothed idf, each block
L2-normalised, weighted 0.5 / 0.3 / 0.2 and the whole normalised; the error message read as spark reads it (pytest's
long traceback form folded into the short one: traceback_form.py; addresses, temp paths, times, hex ids replaced);
the test function found by a scan of the lines. What it does differently: the test function's scan is simpler than
spark's (docs/PERFORMANCE.md says where they differ); there is no learnt ranker: the lines are ranked by their
annotation distance (the paper's annotation, w(l) <= epsilon), then by closeness to the failing line.
"""
import argparse
import hashlib
import json
import math
import os
import re
import sqlite3
import sys
import time

import faiss
import Levenshtein
import numpy as np

from traceback_form import canonical_traceback

DIM = 1024
ERROR_DIM, FUNCTION_DIM, CODE_DIM = DIM // 2, DIM // 4, DIM - DIM // 2 - DIM // 4
WEIGHTS = (0.5, 0.3, 0.2)
HNSW_FROM = 8192   # spark's VectorIndexOptions: flat below, HNSW (M = 16, efConstruction 64, efSearch 128) above
HNSW_M, EF_CONSTRUCTION, EF_SEARCH = 16, 64, 128
EPSILON = 0.05     # the paper's annotation threshold (normalized Levenshtein)
SIMILARITY_FLOOR = 0.10
MAX_ERROR_BYTES = 65536

SEED_ERROR = 0x51ED270B27A5F1E3
SEED_BIGRAM = 0x2545F4914F6CDD1D
SEED_GRAM = 0x9E3779B97F4A7C15
SEED_FUNCTION = 0xD6E8FEB86659FD93
SEED_CODE = 0xA0761D6478BD642F
OFFSET = 0xCBF29CE484222325
PRIME = 0x100000001B3
MASK = (1 << 64) - 1

TRIPLE = re.compile(rb'"""|\'\'\'')
WORD = re.compile(rb"[0-9A-Za-z_\x80-\xff]+")
NORMALIZE = [
    (re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"), b"<UUID>"),
    (re.compile(rb"\b0x[0-9a-fA-F]{4,}\b"), b"<ADDR>"),
    (re.compile(rb"(?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)/[^\s'\":,)\]]*"
                rb"|\b[A-Za-z]:\\(?:Users\\[^\\]+\\AppData\\Local\\)?Temp\\[^\s'\":,)\]]*"), b"<TMP>"),
    (re.compile(rb"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
                rb"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), b"<TIME>"),
    (re.compile(rb"\b[0-9a-fA-F]{12,}\b"), b"<HEX>"),
    (re.compile(rb"(?<=[\w$])@[0-9a-f]{5,8}\b"), b"@<HASH>"),
    (re.compile(rb"(localhost:|127\.0\.0\.1:|0\.0\.0\.0:|\[::1\]:)\d{2,5}\b"), rb"\1<PORT>"),
]

_hash_cache = {}


def fnv(data, seed):
    """spark's fnv1a64 (src/base/text.cpp); memoised, since a corpus repeats its words."""
    key = (data, seed)
    h = _hash_cache.get(key)
    if h is None:
        h = seed
        for c in data:
            h = ((h ^ c) * PRIME) & MASK
        _hash_cache[key] = h
    return h


def counts_of(hashes):
    """Hashes (a Python list) -> (unique uint64 array, float32 counts)."""
    if not hashes:
        return np.zeros(0, np.uint64), np.zeros(0, np.float32)
    u, c = np.unique(np.fromiter(hashes, np.uint64, len(hashes)), return_counts=True)
    return u, c.astype(np.float32)


def normalize_message(m):
    m = canonical_traceback(m)
    if len(m) > MAX_ERROR_BYTES:
        m = m[:MAX_ERROR_BYTES // 2] + b"\n" + m[-(MAX_ERROR_BYTES // 2):]
    for pattern, repl in NORMALIZE:
        m = pattern.sub(repl, m)
    return m


def error_terms(message):
    m = normalize_message(message)
    words = WORD.findall(m)
    hs = [fnv(w, SEED_ERROR) for w in words]
    hs += [fnv(b, fnv(a, SEED_BIGRAM)) for a, b in zip(words, words[1:])]
    folded = re.sub(rb"[ \n\t\r]+", b" ", m)
    if folded.startswith(b" "):
        folded = folded[1:]
    folded = folded[:8192]
    hs += [fnv(folded[i:i + 4], SEED_GRAM) for i in range(len(folded) - 3)]
    return counts_of(hs)


def word_terms(code, seed):
    return counts_of([fnv(w, seed) for w in WORD.findall(code) if len(w) >= 2])


def split_test_id(test_id):
    parts = test_id.split("::")
    path = parts[0]
    function = parts[-1].split("[")[0] if len(parts) > 1 else ""
    cls = parts[-2] if len(parts) > 2 else ""
    return path, cls, function


def block_end(lines, first, indent):
    """The last line of the block whose header is lines[first] at `indent`: the last line after it indented deeper
    (or inside a triple-quoted string, or closing a bracket) that is not a comment."""
    last = first
    quote = None   # the triple quote of a string open at the line's start: its lines end nothing
    for i in range(first + 1, len(lines)):
        stripped = lines[i].lstrip()
        in_string = quote is not None
        for q in TRIPLE.findall(lines[i]):
            quote = q if quote is None else (None if q == quote else quote)
        if in_string:
            last = i
            continue
        if not stripped:
            continue
        if len(lines[i]) - len(stripped) <= indent and not stripped.startswith((b")", b"]", b"}")):
            break
        if not stripped.startswith(b"#"):   # trailing comments are not the function's
            last = i
    return last


def test_function_code(source, test_id):
    """The failing test's own function with its decorators: its `def` line found by a regular expression (within its
    class's lines when the test id names a class), down to block_end ("" when not found, as spark's lookup gives
    nothing for a method its class inherits). A scan of the lines, as spark's own lookup is (ast.parse of a 70 KB file
    took ~30 ms here, the scan well under 1 ms)."""
    _, cls, function = split_test_id(test_id)
    lines = source.split(b"\n")
    begin, end = 0, len(source)
    if cls:
        m = re.search(rb"^([ \t]*)class[ \t]+" + re.escape(cls.encode()) + rb"\b", source, re.M)
        if not m:
            return b""
        header = source.count(b"\n", 0, m.start())
        last = block_end(lines, header, len(m.group(1)))
        begin, end = m.end(), sum(len(x) + 1 for x in lines[:last + 1])
    m = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+" + re.escape(function.encode()) + rb"[ \t]*\(",
                   re.M).search(source, begin, end)
    if not m:
        return b""
    indent = len(m.group(1))
    first = source.count(b"\n", 0, m.start())
    last = block_end(lines, first, indent)
    # Decorators: the lines above back to the first `@` at the def's indent (a decorator's own lines, deeper or
    # closing its brackets, between).
    top = first
    i = first - 1
    while i >= 0:
        stripped = lines[i].lstrip()
        at = len(lines[i]) - len(stripped)
        if stripped.startswith(b"@") and at == indent:
            top = i
        elif not stripped or (at <= indent and not stripped.startswith((b")", b"]", b"}"))):
            break
        i -= 1
    return b"\n".join(lines[top:last + 1])


def test_file_of(test_id, files):
    path, _, _ = split_test_id(test_id)
    for f in files:
        if f["path"] == path or f["path"].endswith("/" + path) or path.endswith("/" + f["path"]):
            return f
    return files[0]


def content_key(case):
    h = hashlib.blake2b(case["error_message"].encode(), digest_size=8)
    for f in case["files"]:
        h.update(b"\0" + f["path"].encode() + b"\0" + f["content"].encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------------- store

SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (key TEXT PRIMARY KEY, content BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS cases (rowid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, test_id TEXT NOT NULL,
  failure_time TEXT, error_message TEXT NOT NULL, faulty_lines TEXT NOT NULL, files TEXT NOT NULL,
  content_key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS cases_key ON cases(content_key);
"""


def open_store(kb):
    os.makedirs(kb, exist_ok=True)
    db = sqlite3.connect(os.path.join(kb, "cases.sqlite"))
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    return db


def cmd_import(args):
    db = open_store(args.kb)
    n = 0
    for path in args.cases:
        with open(path, "rb") as f:
            batch, blobs = [], {}
            for line in f:
                c = json.loads(line)
                keys = []
                for fl in c["files"]:
                    data = fl["content"].encode()
                    key = hashlib.blake2b(data, digest_size=16).hexdigest()
                    blobs[key] = data
                    keys.append([fl["path"], key])
                batch.append((c["id"], c["test_id"], c.get("failure_time"), c["error_message"],
                              json.dumps(c.get("faulty_lines") or []), json.dumps(keys), content_key(c)))
                if len(batch) == 1000:
                    write_batch(db, batch, blobs)
                    n += len(batch)
                    batch, blobs = [], {}
            write_batch(db, batch, blobs)
            n += len(batch)
    db.close()
    print(f"imported {n} cases", file=sys.stderr)


def write_batch(db, batch, blobs):
    with db:
        db.executemany("INSERT OR IGNORE INTO blobs(key, content) VALUES (?, ?)", blobs.items())
        db.executemany("INSERT OR REPLACE INTO cases(id, test_id, failure_time, error_message, faulty_lines, files, "
                       "content_key) VALUES (?, ?, ?, ?, ?, ?, ?)", batch)


# ---------------------------------------------------------------------------------------------------------- features

class Idf:
    """Document frequencies as sorted arrays: idf of many terms by one searchsorted."""

    def __init__(self, terms, counts, documents):
        self.terms, self.counts, self.documents = terms, counts, documents

    def __call__(self, hashes):
        at = np.searchsorted(self.terms, hashes)
        at = np.minimum(at, len(self.terms) - 1)
        df = np.where(self.terms[at] == hashes, self.counts[at], 0).astype(np.float64)
        return (np.log((self.documents + 1.0) / (df + 1.0)) + 1.0).astype(np.float32)


def block(terms, idf, n):
    hashes, counts = terms
    out = np.zeros(n, np.float32)
    if len(hashes):
        w = (1.0 + np.log(counts)) * idf(hashes)
        w = np.where(hashes & np.uint64(1), -w, w)
        out = np.bincount(((hashes >> np.uint64(1)) % np.uint64(n)).astype(np.int64), weights=w, minlength=n)
        out = out.astype(np.float32)
        norm = np.linalg.norm(out)
        if norm > 0:
            out /= norm
    return out


SCALE = np.concatenate([np.full(ERROR_DIM, math.sqrt(WEIGHTS[0])), np.full(FUNCTION_DIM, math.sqrt(WEIGHTS[1])),
                        np.full(CODE_DIM, math.sqrt(WEIGHTS[2]))]).astype(np.float32)


def assemble(e, f, c):
    v = np.concatenate([e, f, c]) * SCALE
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 else v


def blob(db, key):
    return db.execute("SELECT content FROM blobs WHERE key = ?", (key,)).fetchone()[0]


def cmd_index(args):
    t0 = time.perf_counter()
    db = open_store(args.kb)
    rows = db.execute("SELECT rowid, test_id, error_message, files FROM cases ORDER BY rowid").fetchall()
    versions, functions = {}, {}       # files key -> code terms; (test id, files key) -> function terms
    case_parts = []
    for rowid, test_id, message, files in rows:
        keys = json.loads(files)
        vkey = tuple(k for _, k in keys)
        if vkey not in versions:
            code = b"".join(blob(db, k) + b"\n" for k in vkey)
            versions[vkey] = word_terms(code, SEED_CODE)
        fkey = (test_id, vkey)
        if fkey not in functions:
            tf = test_file_of(test_id, [{"path": p, "key": k} for p, k in keys])
            functions[fkey] = word_terms(test_function_code(blob(db, tf["key"]), test_id), SEED_FUNCTION)
        case_parts.append((rowid, error_terms(message.encode()), vkey, fkey))
    t_terms = time.perf_counter()
    # Document frequencies: each case is a document holding its three parts' terms (spark's count_documents).
    version_uses, function_uses = {}, {}
    for _, _, vkey, fkey in case_parts:
        version_uses[vkey] = version_uses.get(vkey, 0) + 1
        function_uses[fkey] = function_uses.get(fkey, 0) + 1
    all_terms = [p[1][0] for p in case_parts]
    all_weights = [np.ones(len(p[1][0]), np.int64) for p in case_parts]
    for vkey, uses in version_uses.items():
        all_terms.append(versions[vkey][0])
        all_weights.append(np.full(len(versions[vkey][0]), uses, np.int64))
    for fkey, uses in function_uses.items():
        all_terms.append(functions[fkey][0])
        all_weights.append(np.full(len(functions[fkey][0]), uses, np.int64))
    terms, inverse = np.unique(np.concatenate(all_terms), return_inverse=True)
    counts = np.bincount(inverse, weights=np.concatenate(all_weights)).astype(np.int64)
    idf = Idf(terms, counts, len(case_parts))
    # Vectors: one code block per version and one function block per (test, version), as spark does.
    code_blocks = {k: block(v, idf, CODE_DIM) for k, v in versions.items()}
    function_blocks = {k: block(v, idf, FUNCTION_DIM) for k, v in functions.items()}
    vectors = np.empty((len(case_parts), DIM), np.float32)
    for i, (_, et, vkey, fkey) in enumerate(case_parts):
        vectors[i] = assemble(block(et, idf, ERROR_DIM), function_blocks[fkey], code_blocks[vkey])
    rowids = np.array([p[0] for p in case_parts], np.int64)
    t_vectors = time.perf_counter()
    if len(vectors) < HNSW_FROM:
        index = faiss.IndexFlatIP(DIM)
    else:
        index = faiss.IndexHNSWFlat(DIM, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
    index.add(vectors)
    folder = os.path.join(args.kb, "index")
    os.makedirs(folder, exist_ok=True)
    faiss.write_index(index, os.path.join(folder, "vectors.faiss"))
    np.save(os.path.join(folder, "rowids.npy"), rowids)
    np.savez(os.path.join(folder, "df.npz"), terms=terms, counts=counts, documents=np.int64(len(case_parts)))
    t_end = time.perf_counter()
    print(f"index: {len(case_parts)} cases, {len(versions)} versions, "
          f"{'flat' if len(vectors) < HNSW_FROM else 'HNSW'}; features {t_terms - t0:.1f} s, "
          f"vectors {t_vectors - t_terms:.1f} s, FAISS {t_end - t_vectors:.1f} s", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------------- localize

class Engine:
    def __init__(self, kb):
        folder = os.path.join(kb, "index")
        self.db = sqlite3.connect(os.path.join(kb, "cases.sqlite"))
        self.index = faiss.read_index(os.path.join(folder, "vectors.faiss"))
        if isinstance(self.index, faiss.IndexHNSWFlat):
            self.index.hnsw.efSearch = EF_SEARCH
        self.rowids = np.load(os.path.join(folder, "rowids.npy"))
        df = np.load(os.path.join(folder, "df.npz"))
        self.idf = Idf(df["terms"], df["counts"], int(df["documents"]))

    def embed(self, message, code, function_code):
        return assemble(block(error_terms(message), self.idf, ERROR_DIM),
                        block(word_terms(function_code, SEED_FUNCTION), self.idf, FUNCTION_DIM),
                        block(word_terms(code, SEED_CODE), self.idf, CODE_DIM))

    def search(self, vector, exclude_id=None, exclude_key=None, r=1):
        """The r most similar cases, never the query itself or its exact duplicates: (rowid, similarity)."""
        want = r + 8
        while True:
            sims, at = self.index.search(vector.reshape(1, -1), min(want, self.index.ntotal))
            hits = [(int(self.rowids[a]), float(s)) for s, a in zip(sims[0], at[0]) if a >= 0]
            excluded = set()
            if exclude_id is not None or exclude_key is not None:
                ids = [h[0] for h in hits]
                marks = ",".join("?" * len(ids))
                for rowid, cid, key in self.db.execute(
                        f"SELECT rowid, id, content_key FROM cases WHERE rowid IN ({marks})", ids):
                    if cid == exclude_id or key == exclude_key:
                        excluded.add(rowid)
            kept = [h for h in hits if h[0] not in excluded]
            if len(kept) >= r or want >= self.index.ntotal:
                return [h for h in kept[:r] if h[1] >= SIMILARITY_FLOOR]
            want *= 4

    def localize(self, test_path, test_source, message, test_id, k=5, exclude_id=None, exclude_key=None):
        vector = self.embed(message, test_source + b"\n", test_function_code(test_source, test_id))
        similar = self.search(vector, exclude_id, exclude_key)
        faulty = []   # the similar cases' faulty lines' text
        retrieved = []
        for rowid, sim in similar:
            cid, faulty_lines, files = self.db.execute(
                "SELECT id, faulty_lines, files FROM cases WHERE rowid = ?", (rowid,)).fetchone()
            retrieved.append({"id": cid, "similarity": sim})
            keys = dict(json.loads(files))
            for fl in json.loads(faulty_lines):
                content = self.db.execute("SELECT content FROM blobs WHERE key = ?", (keys[fl["path"]],)).fetchone()[0]
                lines = content.decode("utf-8", "replace").split("\n")
                if 0 < fl["line"] <= len(lines):
                    faulty.append(lines[fl["line"] - 1].strip())
        lines = test_source.decode("utf-8", "replace").split("\n")
        failing = failing_line(message.decode("utf-8", "replace"), test_path)
        scored = []
        for number, text in enumerate(lines, 1):
            t = text.strip()
            if not t or t.startswith("#"):
                continue
            w = 1.0
            for f in faulty:
                longest = max(len(t), len(f))
                if abs(len(t) - len(f)) > EPSILON * longest:   # the distance is at least the length difference
                    continue
                w = min(w, Levenshtein.distance(t, f) / longest)
            scored.append((w if w <= EPSILON else 1.0, abs(number - failing) if failing else 0, number, text))
        scored.sort()
        return {"retrieved": retrieved,
                "lines": [{"line": n, "annotated": w <= EPSILON, "distance": round(w, 4), "text": x}
                          for w, _, n, x in scored[:k]]}


def failing_line(message, test_path):
    """The last line of the test file the traceback names (0 when none)."""
    name = re.escape(os.path.basename(test_path))
    found = re.findall(rf"{name}:(\d+)", message)
    return int(found[-1]) if found else 0


def cmd_localize(args):
    engine = Engine(args.kb)
    with open(args.test, "rb") as f:
        source = f.read()
    with open(args.error, "rb") as f:
        message = f.read()
    answer = engine.localize(args.test, source, message, args.test_id, args.k)
    json.dump(answer, sys.stdout)
    sys.stdout.write("\n")


def cmd_loo(args):
    """Each stored case localized against the rest (its id and exact duplicates left out): the retrieved case."""
    engine = Engine(args.kb)
    rows = engine.db.execute("SELECT id, test_id, error_message, files, content_key FROM cases ORDER BY rowid")
    for cid, test_id, message, files, key in rows.fetchall():
        keys = json.loads(files)
        contents = [engine.db.execute("SELECT content FROM blobs WHERE key = ?", (k,)).fetchone()[0] for _, k in keys]
        code = b"".join(c + b"\n" for c in contents)
        tf = test_file_of(test_id, [{"path": p, "i": i} for i, (p, _) in enumerate(keys)])
        vector = engine.embed(message.encode(), code, test_function_code(contents[tf["i"]], test_id))
        hits = engine.search(vector, exclude_id=cid, exclude_key=key)
        ids = [engine.db.execute("SELECT id FROM cases WHERE rowid = ?", (h[0],)).fetchone()[0] for h in hits]
        print(json.dumps({"id": cid, "retrieved": ids[0] if ids else None,
                          "similarity": hits[0][1] if hits else None}))


def cmd_warm(args):
    """Localizes each query of QUERIES.jsonl (cases) in this process, after one load; p50 / p95 ms on stderr."""
    engine = Engine(args.kb)
    times = []
    with open(args.queries, "rb") as f:
        for line in f:
            c = json.loads(line)
            tf = test_file_of(c["test_id"], c["files"])
            t = time.perf_counter()
            engine.localize(tf["path"], tf["content"].encode(), c["error_message"].encode(), c["test_id"])
            times.append((time.perf_counter() - t) * 1000.0)
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    print(f"{p(0.5):.1f} {p(0.95):.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("import")
    a.add_argument("kb")
    a.add_argument("cases", nargs="+")
    a.set_defaults(run=cmd_import)
    a = sub.add_parser("index")
    a.add_argument("kb")
    a.set_defaults(run=cmd_index)
    a = sub.add_parser("localize")
    a.add_argument("kb")
    a.add_argument("--test", required=True)
    a.add_argument("--error", required=True)
    a.add_argument("--test-id", required=True)
    a.add_argument("-k", type=int, default=5)
    a.set_defaults(run=cmd_localize)
    a = sub.add_parser("loo")
    a.add_argument("kb")
    a.set_defaults(run=cmd_loo)
    a = sub.add_parser("warm")
    a.add_argument("kb")
    a.add_argument("queries")
    a.set_defaults(run=cmd_warm)
    args = ap.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
