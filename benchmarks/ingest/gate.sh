#!/usr/bin/env bash
# Pauses a background build while someone else measures: every 0.5 s, if /tmp/engram-cpu.lock is held (flock -n
# fails), SIGSTOP the processes named in PIDFILE (one pid a line: the server and the build's driver); SIGCONT them
# once it is free. Exits when none of them is alive any more (SIGCONT first, so none is left stopped).
#   benchmarks/ingest/gate.sh /work/big/short/pids &
set -u
pidfile=$1
lock=${ENGRAM_CPU_LOCK:-/tmp/engram-cpu.lock}
stopped=2   # unknown at the start: the first look stops or continues them, and logs which
while :; do
    pids=$(cat "$pidfile" 2>/dev/null)
    alive=""
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    if [ -z "$alive" ] && [ -n "$pids" ]; then exit 0; fi
    if flock -n "$lock" true; then
        if [ $stopped != 0 ] && [ -n "$alive" ]; then kill -CONT $alive 2>/dev/null; stopped=0; echo "$(date -u +%T) resumed"; fi
    else
        # Sent again every time: a process started (or continued by someone else) since the last look stops too.
        if [ -n "$alive" ]; then kill -STOP $alive 2>/dev/null; fi
        if [ $stopped != 1 ] && [ -n "$alive" ]; then stopped=1; echo "$(date -u +%T) paused"; fi
    fi
    sleep 0.5
done
