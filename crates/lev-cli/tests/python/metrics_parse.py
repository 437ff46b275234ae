"""Parse lev's /metrics with prometheus_client's OpenMetrics parser.

Reads the exposition on stdin; prints one JSON object: "families" maps each
family's name to its type, "samples" is every sample as [name, labels, value].
A text the parser refuses exits non-zero with its error.
"""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main() -> None:
    text = sys.stdin.read()
    families = {}
    samples = []
    for family in text_string_to_metric_families(text):
        families[family.name] = family.type
        for s in family.samples:
            samples.append([s.name, dict(s.labels), s.value])
    json.dump({"families": families, "samples": samples}, sys.stdout)


if __name__ == "__main__":
    main()
