#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# bench/mysql_bench.sh RESULTS SECONDS "CLIENTS" "WAITERS" "HOLDS" [PNG]
#
# Section 5 of `make bench` (bench/run.sh): the dlock MariaDB plugin against
# GET_LOCK/RELEASE_LOCK and a hand-rolled InnoDB lock table, all driven by
# the same client tool (bench/mysql_lock.c, prepared statements over the
# unix socket) on one throwaway MariaDB with durable settings
# (innodb_flush_log_at_trx_commit = 1; bench/mysql_server.sh).  Appends
# its tables to RESULTS; with gnuplot, writes the hand-off plot to PNG.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RES=${1:?RESULTS}; T=${2:?SECONDS}; CLIENTS=${3:?CLIENTS}; WAITERS=${4:?WAITERS}
HOLDS=${5:?HOLDS}; PNG=${6:-}
PORT=${BENCH_MY_PORT:-3401}
DIR=$(mktemp -d /tmp/dlock-mybench.XXXXXX)
cleanup() { "$ROOT/bench/mysql_server.sh" stop "$DIR" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT

"$ROOT/scripts/deps.sh" mariadb-server libmariadb-dev libmariadbd-dev >/dev/null
make -s -C "$ROOT/mysql_udf" >/dev/null
gcc -O2 -Wall -I"$ROOT/bench" -o "$DIR/mysql_lock" "$ROOT/bench/mysql_lock.c" \
    $(mariadb_config --cflags --libs) -lpthread
"$ROOT/bench/mysql_server.sh" start "$DIR" "$PORT"
SOCK=$DIR/sock
run() { "$DIR/mysql_lock" "$SOCK" "$@"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
version=$(mariadb -S "$SOCK" -u root -NBe "SELECT VERSION()")

{
echo
echo "## 5. MySQL/MariaDB"
echo
echo "MariaDB $version, innodb_flush_log_at_trx_commit = 1, one throwaway server;"
echo "every system driven by bench/mysql_lock.c (prepared statements, unix socket)."
echo "dlock: \`dlock_acquire(name, NULL)\` / \`dlock_release(name)\` (session-owned);"
echo "dlock keyed: \`dlock_acquire(name, NULL, 30, 'exclusive', key)\` / \`dlock_release(name, key)\` (a lease);"
echo "every dlock grant is committed (flushed) in dlock.held before it is answered."
echo "InnoDB table: \`INSERT IGNORE\` of (name, owner) / \`DELETE\` by name and owner, autocommit."
echo
echo "Uncontended pairs (own name per client), pairs/s:"
echo
echo "| clients | SELECT 1 (×2) | GET_LOCK | InnoDB table | dlock | dlock keyed | dlock / InnoDB table | keyed / InnoDB table | dlock / GET_LOCK |"
echo "|---|---|---|---|---|---|---|---|---|"
} >> "$RES"
for c in $CLIENTS; do
    read -r s1 _ < <(run select1 own "$c" "$T" 0)
    read -r gl _ < <(run getlock own "$c" "$T" 0)
    read -r tb _ < <(run table own "$c" "$T" 0)
    read -r dl _ < <(run dlock own "$c" "$T" 0)
    read -r dk _ < <(run dlockkey own "$c" "$T" 0)
    echo "| $c | $s1 | $gl | $tb | $dl | $dk | $(ratio "$dl" "$tb") | $(ratio "$dk" "$tb") | $(ratio "$dl" "$gl") |" >> "$RES"
done

{
echo
echo "Contended hand-off (one name, N clients looping acquire → hold → release);"
echo "the InnoDB table spins on its INSERT (no queue, no wake-up) and its failed"
echo "attempts are counted:"
echo
} >> "$RES"
: > "$DIR/plot.dat"
for hold in $HOLDS; do
    first=""
    echo "| hold | N | dlock hand-offs/s | Jain | wait p50 / p99 / max ms | GET_LOCK hand-offs/s | Jain | wait p50 / p99 / max ms | InnoDB table (failed INSERTs) | Jain | dlock / GET_LOCK | dlock / InnoDB table |" >> "$RES"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|" >> "$RES"
    for n in $WAITERS; do
        read -r d_rate d_jain d50 d99 dmax _ < <(run dlock one "$n" "$T" "$hold")
        read -r g_rate g_jain g50 g99 gmax _ < <(run getlock one "$n" "$T" "$hold")
        read -r t_rate t_jain _ _ _ t_failed < <(run table one "$n" "$T" "$hold")
        [ -z "$first" ] && first=$d_rate
        echo "| $hold ms | $n | $d_rate | $d_jain | $d50 / $d99 / $dmax | $g_rate | $g_jain | $g50 / $g99 / $gmax | $t_rate ($t_failed) | $t_jain | $(ratio "$d_rate" "$g_rate") | $(ratio "$d_rate" "$t_rate") |" >> "$RES"
        [ "$hold" == "0" ] && echo "$n $d_rate $g_rate $t_rate" >> "$DIR/plot.dat"
        last=$d_rate
    done
    echo "" >> "$RES"
    echo "Hold $hold ms: dlock hand-offs at N=$n / N=${WAITERS%% *} = $(ratio "$last" "$first")." >> "$RES"
    echo "" >> "$RES"
done

if [ -n "$PNG" ] && command -v gnuplot >/dev/null && [ -s "$DIR/plot.dat" ]; then
    gnuplot <<GP
set terminal png size 800,480 noenhanced
set output "$PNG"
set title "MariaDB: contended hand-off, hold 0 ms (higher and flatter is better)"
set xlabel "waiters"; set ylabel "hand-offs/s"; set logscale x 2; set logscale y; set key bottom left
plot "$DIR/plot.dat" using 1:2 with linespoints title "dlock (durable)", \
     "$DIR/plot.dat" using 1:3 with linespoints title "GET_LOCK (in memory)", \
     "$DIR/plot.dat" using 1:4 with linespoints title "InnoDB lock table, spinning (durable)"
GP
    printf '![MariaDB hand-off plot](%s)\n' "$(basename "$PNG")" >> "$RES"
fi
