#!/usr/bin/python3
"""Leave-one-out retrieval of spark against its Python peer: the share of queries that retrieve the same case.

  agreement.py CASES.jsonl SPARK.json PEER.jsonl

CASES.jsonl: the corpus, in the order `spark localize --case CASES.jsonl --format json` answered it (SPARK.json, one
answer per case); PEER.jsonl: `localizer_peer.py loo`'s lines. A different case at the same similarity (within 1e-4,
e.g. two cases with one vector) is counted apart, as a tie.
"""
import json
import sys

ids = [json.loads(line)["id"] for line in open(sys.argv[1], "rb")]
spark = json.load(open(sys.argv[2]))
peer = {r["id"]: r for r in map(json.loads, open(sys.argv[3]))}
assert len(spark) == len(ids), f"{len(spark)} answers for {len(ids)} cases"
same = tie = differ = 0
far = []
for cid, answer in zip(ids, spark):
    s = answer["retrieved"][0] if answer["retrieved"] else None
    p = peer[cid]
    if (s["id"] if s else None) == p["retrieved"]:
        same += 1
    elif s and p["similarity"] is not None and abs(s["similarity"] - p["similarity"]) <= 1e-4:
        tie += 1
    else:
        differ += 1
        far.append((cid, s and s["id"], s and round(s["similarity"], 4), p["retrieved"], p["similarity"] and round(p["similarity"], 4)))
n = len(ids)
print(f"{n} queries: same case {same} ({same / n:.3f}), a tie at the same similarity {tie} ({tie / n:.3f}), "
      f"different {differ} ({differ / n:.3f}); same or tied {(same + tie) / n:.3f}")
for row in far[:int(sys.argv[4]) if len(sys.argv) > 4 else 10]:
    print("  differs:", *row)
