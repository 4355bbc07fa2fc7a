#!/bin/bash
# memlens report --html: the page of a real two-thread run with a timeline (run until it has at
# least 3 snapshots) is rendered by headless Chromium with networking off. The DOM Chromium builds must hold one bar per region and kind
# with the profile's exact bytes, and one read and one write line per thread and region with one
# point per timeline snapshot; a screenshot must come out as a non-empty PNG.
. "$(dirname "$0")/region-lib.bash"
ml_setup
CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
    { echo "chromium not installed: run scripts/deps.sh"; exit 77; }

M=$MEMLENS_BUILD/bin/memlens
ml_build tl 2 -pthread "$ML_KERNELS/timeline.c" || ml_finish
# At least 3 snapshots at 20 ms: the run must last long enough, whatever the machine's speed, so
# the work doubles until it does (generous bound: 128 times the first try, 8 runs).
passes=4000
for try in $(seq 8); do
    MEMLENS_INTERVAL=20ms ml_run tl "$ML_TMP/p" 65536 $passes || ml_finish
    PYTHONPATH=$ML_ROOT/tests/lib python3 -c '
import sys, mlp
sys.exit(len(mlp.load_dir(sys.argv[1])[0].timeline["snaps"]) < 3)' "$ML_TMP/p" && break
    [ $try = 8 ] || passes=$((passes * 2))
done
"$M" report --html "$ML_TMP/r.html" "$ML_TMP/p" || ml_error "report --html failed"

# No network, no profile, no GPU: the page must render from the file alone.
chrome() {
    local dir
    dir=$(mktemp -d "$ML_TMP/chrome.XXXXXX")
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-dev-shm-usage --user-data-dir="$dir" "$@" 2>>"$ML_TMP/chrome.err"
}
chrome --dump-dom "file://$ML_TMP/r.html" >"$ML_TMP/dom.html" || ml_error "chromium --dump-dom failed"
(cd "$ML_TMP" && chrome --window-size=1000,1600 --screenshot="$ML_TMP/shot.png" "file://$ML_TMP/r.html" >/dev/null) ||
    ml_error "chromium --screenshot failed"

ml_check "html" '
import html.parser
p, dom, png = profile(sys.argv[1]), open(sys.argv[2]).read(), sys.argv[3]
class Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.bars, self.paths, self.svgs, self.scripts = [], [], 0, 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "rect" and "data-bytes" in a:
            self.bars.append((a["data-region"], a["class"], int(a["data-bytes"])))
        elif tag == "path" and "tl" in a.get("class", "").split():
            self.paths.append((self.region, int(a["data-thread"]), a["class"].split()[1],
                               a["d"].count("M") + a["d"].count("L"), int(a["data-points"])))
        elif tag == "svg":
            self.svgs += 1
            self.region = a.get("data-region")
        elif tag == "script":
            self.scripts += 1
c = Collect()
c.feed(dom)
eq("scripts in the page", c.scripts, 0)
want_bars = sorted((r, k, p.totals(r)["bytes_read" if k == "rd" else "bytes_written"])
                   for r in p.regions for k in ("rd", "wr"))
eq("bars (region, kind, bytes)", sorted(c.bars), want_bars)
ns = len(p.timeline["snaps"])
ok("several snapshots (%d)" % ns, ns >= 3)
want_paths = []
for r in p.regions:
    for t in p.threads:
        if any(pt for _, pt in p.series(r, t["index"])):
            want_paths += [(r, t["index"], k, ns, ns) for k in ("rd", "wr")]
eq("timeline paths (region, thread, kind, points, data-points)", sorted(c.paths), sorted(want_paths))
data = open(png, "rb").read()
ok("screenshot is a PNG of some size (%d bytes)" % len(data), data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000)
' "$ML_TMP/p" "$ML_TMP/dom.html" "$ML_TMP/shot.png"
[ $ml_failed = 0 ] || { echo "chromium stderr:"; tail -n 5 "$ML_TMP/chrome.err"; }
ml_finish
