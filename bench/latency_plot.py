"""Added latency and memory against request rate, tokenproxy beside nginx (issue 22 point 7).

A paced client (asyncio, keep-alive connections, a fixed schedule of send times so that a slow
answer cannot slow the schedule down: no coordinated omission) sends GET /small at each rate to
three targets in turn: the nginx upstream directly, nginx as a proxy, and tokenproxy. A target's
added latency at a percentile is its latency less the direct one's at that percentile. The RSS of
each proxy process is read from /proc at the end of each step.

Run by bench/latency-plot.sh, which starts the servers; not part of CI (it takes minutes and its
numbers depend on the machine). Writes a PNG and the figures as JSON.
"""

import argparse
import asyncio
import json
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PERCENTILES = (50, 90, 99)


async def paced(port: int, rate: int, seconds: float, connections: int) -> list[float]:
    """Latencies (seconds) of requests sent at `rate`/s on `connections` keep-alive connections."""
    request = b"GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    total = int(rate * seconds)
    start = time.perf_counter() + 0.2
    latencies: list[float] = []
    queue: asyncio.Queue[float] = asyncio.Queue()

    async def worker():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while True:
                due = await queue.get()
                if due < 0:
                    return
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                # From when it was due, not when it was sent: a late send counts as latency.
                latencies.append(time.perf_counter() - due)
        finally:
            writer.close()

    for i in range(total):
        queue.put_nowait(start + i / rate)
    for _ in range(connections):
        queue.put_nowait(-1.0)
    await asyncio.gather(*(worker() for _ in range(connections)))
    return latencies


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--direct-port", type=int, required=True)
    ap.add_argument("--nginx-port", type=int, required=True)
    ap.add_argument("--nginx-pid", type=int, required=True)
    ap.add_argument("--tokenproxy-port", type=int, required=True)
    ap.add_argument("--tokenproxy-pid", type=int, required=True)
    ap.add_argument("--rates", default="250,500,1000,2000,3000")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--out", required=True, help="PNG path; the figures go beside it as .json")
    ap.add_argument("--title", default="")
    args = ap.parse_args()

    rates = [int(r) for r in args.rates.split(",")]
    results = {"rates": rates, "nginx": [], "tokenproxy": [], "direct": []}
    for rate in rates:
        direct = asyncio.run(paced(args.direct_port, rate, args.seconds, args.connections))
        base = {p: percentile(direct, p) for p in PERCENTILES}
        results["direct"].append({str(p): base[p] for p in PERCENTILES})
        for name, port, pid in (
            ("nginx", args.nginx_port, args.nginx_pid),
            ("tokenproxy", args.tokenproxy_port, args.tokenproxy_pid),
        ):
            lat = asyncio.run(paced(port, rate, args.seconds, args.connections))
            added = {str(p): max(percentile(lat, p) - base[p], 0) for p in PERCENTILES}
            results[name].append({"added": added, "rss_mib": rss_mib(pid), "n": len(lat)})
            print(f"{rate:>6}/s {name:<10} added p50 {added['50']*1e3:.3f} ms p90 {added['90']*1e3:.3f} ms "
                  f"p99 {added['99']*1e3:.3f} ms rss {results[name][-1]['rss_mib']:.1f} MiB", flush=True)

    with open(args.out.rsplit(".", 1)[0] + ".json", "w") as f:
        json.dump(results, f, indent=1)

    fig, (lat_ax, rss_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {"nginx": "tab:green", "tokenproxy": "tab:blue"}
    marks = {50: "o-", 90: "s--", 99: "^:"}
    for name, color in styles.items():
        for p in PERCENTILES:
            lat_ax.plot(rates, [r["added"][str(p)] * 1e3 for r in results[name]], marks[p], color=color, label=f"{name} p{p}")
        rss_ax.plot(rates, [r["rss_mib"] for r in results[name]], "o-", color=color, label=name)
    lat_ax.set_xlabel("requests per second")
    lat_ax.set_ylabel("added latency (ms), against the upstream directly")
    lat_ax.legend(fontsize=8)
    lat_ax.grid(alpha=0.3)
    rss_ax.set_xlabel("requests per second")
    rss_ax.set_ylabel("RSS (MiB)")
    rss_ax.set_ylim(bottom=0)
    rss_ax.legend()
    rss_ax.grid(alpha=0.3)
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
