#!/usr/bin/env python3
"""The summary of a scripts/bench-index.sh run: Markdown tables (medians over rounds) from its runs.tsv, the
bench's JSON results and the /api/v1/stats snapshots. Usage: bench-index-summary.py OUT ROUNDS CLK_TCK ITEMS
WRITE_ITEMS."""
import json
import os
import statistics
import sys

out, rounds, tck, items, write_items = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def load_runs():
    runs = {}
    path = os.path.join(out, "runs.tsv")
    for line in open(path) if os.path.exists(path) else []:
        name, ticks, rss0, rss_max, contended, load, m0, m1, wall = line.rstrip("\n").split("\t")
        (b0, s0, t0), (b1, s1, t1) = map(int, m0.split()), map(int, m1.split())
        runs[name] = dict(cpu_s=int(ticks) / tck, rss0=int(rss0), rss_max=int(rss_max), contended=contended == "1",
                          load=float(load), busy=(b1 - b0) / max(t1 - t0, 1), steal=(s1 - s0) / max(t1 - t0, 1),
                          wall=float(wall))
    return runs


RUNS = load_runs()


def result(name, phase="run"):
    path = os.path.join(out, name + ".json")
    return json.load(open(path)).get(phase) if os.path.exists(path) else None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=0):
    return "—" if x is None else f"{x:,.{digits}f}"


def spread(xs, digits=0):
    xs = [x for x in xs if x is not None]
    return f" ({fmt(min(xs), digits)}–{fmt(max(xs), digits)})" if len(xs) > 1 else ""


def machine(names):
    metas = [RUNS[n] for n in names if n in RUNS]
    mark = "*" if any(m["contended"] for m in metas) else ""
    text = (f"{fmt(med([m['busy'] * 100 for m in metas]))} % / {fmt(med([m['steal'] * 100 for m in metas]), 1)} % / "
            f"{fmt(med([m['load'] for m in metas]), 1)}")
    return mark, text


def build_section():
    meta = RUNS.get("build")
    if meta is None:
        return
    print("### Index build (CREATE INDEX bench_field0 ON default(field0) over the loaded records)\n")
    print(f"{items:,} documents in {meta['wall']:.1f} s: **{items / meta['wall']:,.0f} documents/s**; server CPU "
          f"{meta['cpu_s']:.1f} s ({meta['cpu_s'] * 1e6 / items:.2f} µs per document); RSS "
          f"{meta['rss0'] / 1024:,.0f} → peak {meta['rss_max'] / 1024:,.0f} MiB; machine busy {meta['busy'] * 100:.0f} %, "
          f"steal {meta['steal'] * 100:.1f} %, load {meta['load']:.1f}{' (contended)' if meta['contended'] else ''}\n")
    print("| index | when | items | memory_used | B/entry | disk_size | B/entry |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, file in [("after build", "stats-after-build.json"), ("+10 s", "stats-after-build-10s.json"),
                        ("end", "stats-end.json")]:
        path = os.path.join(out, file)
        if not os.path.exists(path):
            continue
        stats = json.load(open(path))
        for name in ("default:#primary", "default:bench_field0"):
            s = stats.get(name)
            if not s:
                continue
            n = max(s["items_count"], 1)
            print(f"| {name} | {label} | {s['items_count']:,} | {s['memory_used']:,} | {s['memory_used'] / n:,.1f} | "
                  f"{s['disk_size']:,} | {s['disk_size'] / n:,.1f} |")
    print()


def query_section():
    rows = [("field0 = $1, not covered", "field-eq", None), ("field0 = $1, covered", "field-eq-covered", None),
            ("YCSB E, all operations", "e", None), ("YCSB E, scans", "e", "scan"), ("YCSB E, inserts (KV)", "e", "insert")]
    print("### Lookups and YCSB E\n")
    print("| run | ops/s (min–max) | p50 µs | p99 µs | rows/query | server CPU µs/op | peak RSS MiB | errors | "
          "machine busy / steal / load |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for label, key, op in rows:
        names = [f"r{r}-{key}" for r in range(1, rounds + 1)]
        rates, p50, p99, rows_per, cpu, rss, errors = [], [], [], [], [], [], 0
        for name in names:
            res = result(name)
            part = res and (res["operations"].get(op) if op else res)
            if not part:
                continue
            rates.append(part["ops_per_sec"])
            p50.append(part["latency_us"]["p50"])
            p99.append(part["latency_us"]["p99"])
            errors += part["errors"] + part.get("not_found", 0)
            n_rows = part.get("rows") if op else sum(o.get("rows", 0) for o in res["operations"].values())
            rows_per.append(n_rows / max(part["ops"], 1) if n_rows else None)
            if name in RUNS and op is None:
                cpu.append(RUNS[name]["cpu_s"] * 1e6 / max(res["ops"], 1))
                rss.append(RUNS[name]["rss_max"] / 1024)
        if not rates:
            continue
        mark, busy = machine(names)
        digits = 2 if med(rates) < 10 else 0
        print(f"| {label}{mark} | {fmt(med(rates), digits)}{spread(rates, digits)} | {fmt(med(p50))} | "
              f"{fmt(med(p99))} | {fmt(med(rows_per), 1)} | {fmt(med(cpu), 1)} | {fmt(med(rss))} | {errors} | {busy} |")
    print("\n(errors counts errors and lookups without a row.)\n")


def write_section():
    base = None
    lines = []
    for k in (0, 1, 3):
        names = [f"r{r}-write-{k}" for r in range(1, rounds + 1)]
        kv, indexed, cpu = [], [], []
        for name in names:
            res = result(name, "load")
            meta = RUNS.get(name)
            if not res or not meta:
                continue
            kv.append(res["ops_per_sec"])
            indexed.append(write_items / meta["wall"])
            cpu.append(meta["cpu_s"] * 1e6 / write_items)
        if not kv:
            continue
        if k == 0:
            base = (med(kv), med(indexed), med(cpu))
        lines.append((k, names, kv, indexed, cpu))
    if not lines:
        return
    print(f"### Writes with 0, 1 and 3 secondary indexes ({write_items:,} YCSB inserts into a fresh collection)\n")
    print("| indexes | KV inserts/s (min–max) | × no index | inserted + indexed/s | × no index | server CPU µs/write | "
          "index CPU µs/write | machine busy / steal / load |")
    print("|---:|---|---:|---|---:|---:|---:|---|")
    for k, names, kv, indexed, cpu in lines:
        mark, busy = machine(names)
        ratio = lambda x, b: "—" if not b or x is None else f"{x / b:.2f}"
        extra = None if base is None else med(cpu) - base[2]
        print(f"| {k}{mark} | {fmt(med(kv))}{spread(kv)} | {ratio(med(kv), base and base[0])} | "
              f"{fmt(med(indexed))}{spread(indexed)} | {ratio(med(indexed), base and base[1])} | {fmt(med(cpu), 2)} | "
              f"{fmt(extra, 2) if k else '—'} | {busy} |")
    print("\n(inserted + indexed/s: inserts ÷ the time from the load's start until every index holds them all; "
          "index CPU: the server's CPU per write above the run without indexes.)\n")


def rplus_section():
    rows = []
    for c in ("not_bounded", "request_plus"):
        names = [f"r{r}-rplus-{c}" for r in range(1, rounds + 1)]
        rates, p50, p99, writes = [], [], [], []
        for r, name in enumerate(names, 1):
            res = result(name)
            if res:
                rates.append(res["ops_per_sec"])
                p50.append(res["latency_us"]["p50"])
                p99.append(res["latency_us"]["p99"])
            w = result(f"r{r}-rplus-{c}-writes")
            if w and "set" in w["operations"]:
                writes.append(w["operations"]["set"]["ops_per_sec"])
        if rates:
            rows.append((c, names, rates, p50, p99, writes))
    if not rows:
        return
    print("### request_plus beside a sustained write load (covered field0 lookups)\n")
    print("| scan_consistency | queries/s (min–max) | p50 µs | p99 µs | updates/s beside | machine busy / steal / load |")
    print("|---|---|---:|---:|---:|---|")
    for c, names, rates, p50, p99, writes in rows:
        mark, busy = machine(names)
        print(f"| {c}{mark} | {fmt(med(rates))}{spread(rates)} | {fmt(med(p50))} | {fmt(med(p99))} | "
              f"{fmt(med(writes))} | {busy} |")
    if len(rows) == 2:
        (_, _, _, a50, a99, _), (_, _, _, b50, b99, _) = rows
        print(f"\nrequest_plus extra latency: p50 {fmt(med(b50) - med(a50))} µs, p99 {fmt(med(b99) - med(a99))} µs\n")


load = result("load", "load")
if load:
    meta = RUNS.get("load", {})
    print(f"Load: {load['ops']:,} inserts at {load['ops_per_sec']:,.0f}/s, then the primary index: "
          f"{meta.get('wall', 0):.1f} s in all\n")
build_section()
query_section()
write_section()
rplus_section()
