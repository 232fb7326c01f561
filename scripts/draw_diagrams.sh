#!/usr/bin/env bash
# Draws the manual's pictures from their sources in docs/diagrams/ into docs/NAME.png: Graphviz's
# dot for each NAME.dot, matplotlib for clock.py. Needs graphviz (apt-get install graphviz) and
# matplotlib (scripts/lib.sh: ensure_matplotlib). Run after changing a source; commit both.
set -euo pipefail
cd "$(dirname "$0")/.."
for source in docs/diagrams/*.dot; do
    dot -Tpng -Gdpi=110 "$source" -o "docs/$(basename "${source%.dot}").png"
done
python3 docs/diagrams/clock.py docs/clock.png
