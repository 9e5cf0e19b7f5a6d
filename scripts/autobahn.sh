#!/usr/bin/env bash
# Runs the Autobahn|Testsuite (wstest 0.8.2, Python 2.7) against cleave's
# WebSocket examples and summarises the results per case group.
#
#   scripts/autobahn.sh server            # wstest fuzzingclient -> examples/ws_echo_server
#   scripts/autobahn.sh server-deflate    # the same with permessage-deflate: groups 12 and 13
#   scripts/autobahn.sh client            # examples/ws_client --autobahn -> wstest fuzzingserver
#   scripts/autobahn.sh client-deflate
#   AUTOBAHN_SERVER=ws_echo_mio_server scripts/autobahn.sh server   # the mio echo server
#
# Each run writes autobahn/<run>.json (case -> behaviour, behaviour on
# close), which is committed: a change that loses a case shows in review.
# The full HTML reports go to target/autobahn/<run>/. Exits non-zero
# unless every case is OK or INFORMATIONAL (see autobahn/summary.py).
#
# wstest: WSTEST=/path/to/wstest, else ~/.local/bin/wstest, else installed
# with pyenv's Python 2.7 (pip install --user autobahntestsuite==0.8.2).
set -euo pipefail
cd "$(dirname "$0")/.."

run=${1:-server}
port=${AUTOBAHN_PORT:-9001}
server=${AUTOBAHN_SERVER:-ws_echo_server}
# The results file names the server when it is not the default one.
name=$run
[ "$server" = ws_echo_server ] || name=$run-${server#ws_echo_}
case "$run" in
server | client) cases='["1.*","2.*","3.*","4.*","5.*","6.*","7.*","8.*","9.*","10.*"]' features=() ;;
server-deflate | client-deflate) cases='["12.*","13.*"]' features=(--features deflate) ;;
*)
    echo "usage: $0 server|server-deflate|client|client-deflate" >&2
    exit 2
    ;;
esac

wstest=${WSTEST:-$HOME/.local/bin/wstest}
if [ ! -x "$wstest" ]; then
    python2=${PYTHON2:-$HOME/.pyenv/versions/2.7.18/bin/python}
    "$python2" -m pip install --user --quiet autobahntestsuite==0.8.2
fi

out=target/autobahn/$name
rm -rf "$out"
mkdir -p "$out"
cargo build --release -p cleave-examples "${features[@]}" --example "$server" --example ws_client

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

wait_for_port() {
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "nothing listens on 127.0.0.1:$port" >&2
    return 1
}

case "$run" in
server*)
    target/release/examples/"$server" --listen "127.0.0.1:$port" >"$out/server.log" 2>&1 &
    pids+=($!)
    wait_for_port
    cat >"$out/fuzzingclient.json" <<JSON
{"outdir": "$PWD/$out/reports", "servers": [{"agent": "cleave", "url": "ws://127.0.0.1:$port"}],
 "cases": $cases, "exclude-cases": [], "exclude-agent-cases": {}}
JSON
    "$wstest" -m fuzzingclient -s "$out/fuzzingclient.json" >"$out/wstest.log" 2>&1
    index=$out/reports/index.json
    ;;
client*)
    cat >"$out/fuzzingserver.json" <<JSON
{"url": "ws://127.0.0.1:$port", "outdir": "$PWD/$out/reports",
 "cases": $cases, "exclude-cases": [], "exclude-agent-cases": {}}
JSON
    (cd "$out" && exec "$wstest" -m fuzzingserver -s fuzzingserver.json) >"$out/wstest.log" 2>&1 &
    pids+=($!)
    wait_for_port
    target/release/examples/ws_client --addr "127.0.0.1:$port" --autobahn >"$out/client.log" 2>&1
    index=$out/reports/index.json
    ;;
esac

python3 autobahn/summary.py "$index" "autobahn/$name.json"
