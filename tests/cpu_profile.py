"""Sum the per-test CPU log of ``$DYNLAB_TEST_CPU_LOG`` (see tests/conftest.py) per module, or list tests.

    python tests/cpu_profile.py DIR [--tests N] [--match TEXT]
"""

import argparse
import collections
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--tests", type=int, default=0, help="list the N costliest tests instead of modules")
    parser.add_argument("--match", default="", help="only node ids containing this")
    args = parser.parse_args()
    records = [json.loads(line) for f in Path(args.dir).glob("*.jsonl") for line in f.read_text().splitlines()]
    records = [r for r in records if args.match in r["id"]]
    cpu = lambda r: r["self"] + r["kids"]  # noqa: E731
    print(f"{len(records)} tests: {sum(map(cpu, records)):.0f} s CPU ({sum(r['kids'] for r in records):.0f} in "
          f"started processes), {sum(r['wall'] for r in records):.0f} s wall summed")
    if args.tests:
        for r in sorted(records, key=cpu, reverse=True)[: args.tests]:
            print(f"{cpu(r):7.1f} s CPU {r['kids']:6.1f} kids {r['wall']:7.1f} wall  {r['id']}")
        return
    modules = collections.defaultdict(list)
    for r in records:
        modules[r["id"].split("::")[0]].append(r)
    for name, rs in sorted(modules.items(), key=lambda kv: -sum(map(cpu, kv[1]))):
        print(f"{sum(map(cpu, rs)):7.1f} s CPU {sum(r['kids'] for r in rs):6.1f} kids {sum(r['wall'] for r in rs):7.1f} wall "
              f"{len(rs):4d} tests  {name}")


if __name__ == "__main__":
    main()
