#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# bench/compare.sh [--quick] BEFORE AFTER — the benchmark's sections 1, 3
# and 4 for two commits side by side, in one run on this machine: each
# commit is built into its own private PostgreSQL copy, both throwaway
# clusters (fsync on, the bench's settings) run at once, and every cell is
# measured on both, before-after-after-before, each side averaged.  A cell
# where AFTER is below 0.95 of BEFORE is measured again, both shown.
# Writes bench/results/<date>-<host>-compare.md.  Never gates anything.
# SECTIONS="4" runs only section 4, COMPARE_SCALE="1000000" only that step.
#
#   bench/compare.sh 3e4e41f HEAD
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0; [ "${1:-}" == "--quick" ] && { QUICK=1; shift; }
BEFORE=$(git -C "$ROOT" rev-parse --short "${1:?usage: compare.sh [--quick] BEFORE AFTER}")
AFTER=$(git -C "$ROOT" rev-parse --short "${2:?usage: compare.sh [--quick] BEFORE AFTER}")
PORTS=(5496 5497)
SIDES=(before after)
REVS=("$BEFORE" "$AFTER")
DIR=$(mktemp -d /tmp/dlock-compare.XXXXXX); chmod 755 "$DIR"
OUT=$ROOT/bench/results; mkdir -p "$OUT"
RES=$OUT/$(date -u +%Y-%m-%d)-$(hostname -s)-compare.md
if [ $QUICK -eq 1 ]; then T=2; CLIENTS="1 32"; WAITERS="2 32"; HOLDS="0"; SCALE="2000 20000"
else T=10; CLIENTS="1 8 32"; WAITERS="2 8 32 128"; HOLDS="0 1"; SCALE="10000 100000 1000000"; fi
# SECTIONS="4" (say) runs only those; SCALE="1000000" only that step
SECTIONS=" ${SECTIONS:-1 3 4} "; SCALE=${COMPARE_SCALE:-$SCALE}

cleanup() {
    for i in 0 1; do
        PG_CONFIG=${PGC[$i]:-pg_config} "$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg-${SIDES[$i]}" 2>/dev/null
    done
    rm -rf "$DIR"
}
trap cleanup EXIT

. "$ROOT/bench/lib.sh"
"$ROOT/scripts/deps.sh" >/dev/null
gcc -O2 -Wall -o "$DIR/handoff" "$ROOT/bench/handoff.c" -I"$(pg_config --includedir)" -lpq -lpthread

# each commit: its source, a private PostgreSQL with it installed, a cluster
PGC=()
for i in 0 1; do
    side=${SIDES[$i]}
    mkdir -p "$DIR/src-$side"
    git -C "$ROOT" archive "${REVS[$i]}" | tar -x -C "$DIR/src-$side"
    PGC[$i]=$("$ROOT/scripts/private_pg.sh" "/opt/dlock-compare-$side")
    make -s -C "$DIR/src-$side/pg_ext" PG_CONFIG="${PGC[$i]}" >/dev/null
    make -s -C "$DIR/src-$side/pg_ext" PG_CONFIG="${PGC[$i]}" install >/dev/null
    PG_CONFIG=${PGC[$i]} PG_FSYNC=on PG_EXTRA_CONF="max_connections = 300
dlock.reap_interval = '1s'" "$ROOT/scripts/pg_cluster.sh" start "$DIR/pg-$side" "${PORTS[$i]}"
done
export PGUSER=postgres PGDATABASE=postgres
on() { export PGHOST=$DIR/pg-${SIDES[$1]} PGPORT=${PORTS[$1]}; }
conninfo() { echo "host=$DIR/pg-${SIDES[$1]} port=${PORTS[$1]} user=postgres dbname=postgres"; }
write_scripts

# measure CMD... on both sides in the order before, after, after, before
# (what the side measured first leaves behind, autovacuum of its tables
# say, weighs on the next one: each side goes first once); sets
# BOTH="mean-before mean-after".  No subshell: globals must persist.
both() {
    local r=() i
    for i in 0 1 1 0; do on "$i"; r+=("$("$@")"); done
    BOTH="$(( (r[0] + r[3]) / 2 )) $(( (r[1] + r[2]) / 2 ))"
}
# both, again if AFTER is below 0.95 of BEFORE; sets CELL="b a [b2 a2]"
cell() {
    local b a
    both "$@"; CELL=$BOTH
    read -r b a <<< "$BOTH"
    if awk -v b="$b" -v a="$a" 'BEGIN { exit !(b > 0 && a / b < 0.95) }'; then
        both "$@"; CELL="$CELL $BOTH"
    fi
}
# "b → a (ratio)", with the repeat when there was one
show() {
    if [ $# -gt 2 ]; then
        echo "$1 / $3 | $2 / $4 | $(ratio "$2" "$1") / $(ratio "$4" "$3")"
    else
        echo "$1 | $2 | $(ratio "$2" "$1")"
    fi
}
rate_async() { set_async off; rate "$1" dlock; set_async on; }
handoff() { "$DIR/handoff" "host=$PGHOST port=$PGPORT user=postgres dbname=postgres" "${3:-dlock}" "$1" "$T" "$2" | cut -d' ' -f1; }
# one name through pgbench (-M prepared -j 2): the cell issue 13 states its goals in
one_name() { pgbench -n -M prepared -j 2 -c "$1" -T "$T" -f "$DIR/one_$2.sql" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1; }
printf "SELECT dlock_acquire('one');\nSELECT dlock_release('one');\n" > "$DIR/one_dlock.sql"
printf "SELECT pg_advisory_lock(1);\nSELECT pg_advisory_unlock(1);\n" > "$DIR/one_advisory.sql"
# an anchor measured once on each cluster, averaged: sets ANCHOR
anchor() { local a b; on 0; a=$("$@"); on 1; b=$("$@"); ANCHOR=$(( (a + b) / 2 )); }

{
echo "# dlock before and after — $(date -u +%Y-%m-%d) on $(hostname -s)"
echo
echo "before: $BEFORE ($(git -C "$ROOT" log -1 --format=%s "$BEFORE" | cut -c1-80)…)"
echo "after: $AFTER ($(git -C "$ROOT" log -1 --format=%s "$AFTER" | cut -c1-80)…)"
echo
echo "$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, PostgreSQL $(pg_config --version | cut -d' ' -f2), fsync on, cells of ${T} s$([ $QUICK -eq 1 ] && echo ', quick run')."
echo "Both clusters run at once; each cell is measured four times, before, after, after,"
echo "before, and each side's two results are averaged; a cell where after/before < 0.95"
echo "is measured again that way (shown as first / second)."
echo
echo "## 1. Uncontended pairs (acquire + release, own name per client), pairs/s"
echo
echo "| clients | kind | before | after | after / before |"
echo "|---|---|---|---|---|"
} > "$RES"
[[ $SECTIONS == *" 1 "* ]] || CLIENTS=""
for c in $CLIENTS; do
    cell rate "$c" dlock; echo "| $c | dlock | $(show $CELL) |" >> "$RES"
    cell rate "$c" lease; echo "| $c | dlock lease | $(show $CELL) |" >> "$RES"
    cell rate_async "$c"; echo "| $c | dlock async | $(show $CELL) |" >> "$RES"
done

{
echo
echo "## 3. Contended hand-off: one name, N clients looping acquire → hold → release, hand-offs/s"
echo
echo "pg_advisory_lock on one key is the anchor, measured once on each cluster and averaged."
echo
echo "| hold | N | before | after | after / before | advisory | after / advisory |"
echo "|---|---|---|---|---|---|---|"
} >> "$RES"
[[ $SECTIONS == *" 3 "* ]] || HOLDS=""
for hold in $HOLDS; do
    for n in $WAITERS; do
        cell handoff "$n" "$hold"; anchor handoff "$n" "$hold" advisory
        echo "| $hold ms | $n | $(show $CELL) | $ANCHOR | $(ratio "$(echo $CELL | cut -d' ' -f2)" "$ANCHOR") |" >> "$RES"
    done
done
if [[ $SECTIONS == *" 3 "* ]]; then
    {
    echo
    echo "The same through pgbench (\`-M prepared -j 2\`, one name, acquire + release, hold 0), pairs/s:"
    echo
    echo "| N | before | after | after / before | advisory | after / advisory |"
    echo "|---|---|---|---|---|---|"
    } >> "$RES"
    for n in $WAITERS; do
        cell one_name "$n" dlock; anchor one_name "$n" advisory
        echo "| $n | $(show $CELL) | $ANCHOR | $(ratio "$(echo $CELL | cut -d' ' -f2)" "$ANCHOR") |" >> "$RES"
    done
fi

[[ $SECTIONS == *" 4 "* ]] || { echo "written to $RES"; exit 0; }
{
echo
echo "## 4. Scale: uncontended pairs at 8 clients with other leases held (each its own owner key)"
echo
echo "| leases held | pairs/s before | after | after / before | worker RssAnon MiB before | after |"
echo "|---|---|---|---|---|---|"
} >> "$RES"
have=0
declare -A RSS
for i in 0 1; do on "$i"; RSS[$i,0]=$(worker_rss); done
declare -A LOAD_RATE
for held in $SCALE; do
    for i in 0 1; do
        on "$i"; t0=$(date +%s.%N)
        load_leases $((have + 1)) "$held" "'1 hour'"
        LOAD_RATE[$i]=$(awk -v n=$((held - have)) -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%d", n / (t1 - t0) }')
    done
    have=$held
    cell rate 8 dlock; read -r -a r <<< "$CELL"
    for i in 0 1; do on "$i"; RSS[$i,$held]=$(worker_rss); done
    echo "| $held | $(show "${r[@]}") | ${RSS[0,$held]} | ${RSS[1,$held]} |" >> "$RES"
done
{
echo
for i in 0 1; do
    echo "Memory per held lease, ${SIDES[$i]}: $(awk -v a="${RSS[$i,0]}" -v b="${RSS[$i,$have]}" -v n="$have" 'BEGIN { printf "%.0f", (b - a) * 1048576 / n }') bytes (RssAnon growth from 0 to $have leases)."
done
echo
echo "Mass expiry: the $have leases renewed to run out at one moment, one side at a time;"
echo "8 clients acquire and release their own names meanwhile."
echo
echo "| side | renewed in s | all reaped after the deadline, s | pairs/s meanwhile | acquire p50 / p99 / max ms |"
echo "|---|---|---|---|---|"
} >> "$RES"
for i in 0 1; do
    on "$i"
    # a deadline after the renewal (at the load rate seen, +50%) and a margin
    t0=$(date +%s)
    secs=$(awk -v n="$have" -v r="${LOAD_RATE[$i]}" 'BEGIN { printf "%d", n / r * 1.5 + 15 }')
    deadline=$(psql -X -At -c "SELECT now() + '$secs s'")
    for_leases 1 "$have" "dlock_renew('scale/' || i, ttl => '$deadline'::timestamptz - clock_timestamp(), owner => 'scale-' || i)"
    renewed=$(( $(date +%s) - t0 ))
    left=$(psql -X -At -c "SELECT ceil(extract(epoch FROM '$deadline'::timestamptz - now()))")
    [ "$left" -gt 1 ] && sleep $((left - 1))
    window=$([ $QUICK -eq 1 ] && echo 8 || echo 20)
    "$DIR/handoff" "$(conninfo "$i")" dlock-own 8 "$window" 0 > "$DIR/expiry-$i" &
    lat=$!
    reaped="not within 60 s"
    for _ in $(seq 120); do
        if [ "$(psql -X -At -c "SELECT count(*) FROM dlock.held WHERE name LIKE 'scale/%'")" -eq 0 ]; then
            reaped=$(psql -X -At -c "SELECT round(extract(epoch FROM clock_timestamp() - '$deadline')::numeric, 1)")
            break
        fi
        sleep 0.5
    done
    wait $lat
    read -r l_rate _ l50 l99 lmax < "$DIR/expiry-$i"
    echo "| ${SIDES[$i]} | $renewed | $reaped | $l_rate | $l50 / $l99 / $lmax |" >> "$RES"
done
echo "written to $RES"
