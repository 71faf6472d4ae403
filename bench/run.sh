#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# bench/run.sh [--quick] — `make bench`: dlock against its anchors, measured
# in the same run on the same throwaway server (fsync on), written to
# bench/results/<date>-<host>.md with a PNG plot (a second run of the day:
# <date>-<host>-2.md, ...).  Benchmarks never gate CI.
# BENCH_SECTIONS="6 8" (say) runs only those workloads and writes
# bench/results/<date>-<host>-sections-6-8.md (and its plots) instead, so a
# partial run never overwrites the day's full one.  BENCH_SCALE="0 200000"
# (say) replaces section 4's lease counts (a memory figure per lease needs
# no million).
#
# Workloads (see shared BENCHMARKS.md): 1 uncontended pairs, 2 try-lock
# pairs, 3 contended hand-off, 4 scale with many held leases and their mass
# expiry, 5 MySQL/MariaDB (bench/mysql_bench.sh), 6 dlock vs ZooKeeper
# (bench/coord.py), 7 adversarial names and crowds (bench/adversarial.sh),
# 8 dlock vs etcd (bench/coordgo, one Go driver).
# Anchors:
# SELECT 1, pg_advisory_lock, a hand-rolled lock table, and a Redis
# SET NX PX lock (bench/redis_lock.c, its own redis-server, not durable).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0; [ "${1:-}" == "--quick" ] && QUICK=1
PORT=${BENCH_PORT:-5494}
RPORT=${BENCH_REDIS_PORT:-6391}
EPORT=${BENCH_ETCD_PORT:-2391}; EPEER=${BENCH_ETCD_PEER_PORT:-2392}
RPID=; EPID=
SECTIONS=$(echo ${BENCH_SECTIONS:-})   # words, single spaces; empty: all
want() { [ -z "$SECTIONS" ] || [[ " $SECTIONS " == *" $1 "* ]]; }
DIR=$(mktemp -d /tmp/dlock-bench.XXXXXX); chmod 755 "$DIR"
OUT=$ROOT/bench/results; mkdir -p "$OUT"
STAMP=$(date -u +%Y-%m-%d)
PFX=$OUT/$STAMP-$(hostname -s)${SECTIONS:+-sections-${SECTIONS// /-}}  # results and plots
# a second run of the day gets -2, -3, ...: a result once written is kept
day_n=2; day_pfx=$PFX; while [ -e "$PFX.md" ]; do PFX=$day_pfx-$day_n; day_n=$((day_n + 1)); done
RES=$PFX.md
if [ $QUICK -eq 1 ]; then T=2; CLIENTS="1 32"; WAITERS="2 32"; HOLDS="0"; SCALE="0 5000 20000"
else T=10; CLIENTS="1 8 32"; WAITERS="2 8 32 128"; HOLDS="0 1"; SCALE="0 10000 100000 1000000"; fi
SCALE=${BENCH_SCALE:-$SCALE}

cleanup() {
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg" 2>/dev/null
    [ -n "$RPID" ] && kill "$RPID" 2>/dev/null
    if [ -n "$EPID" ] && kill "$EPID" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$EPID" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$EPID" 2>/dev/null || true
    fi
    rm -rf "$DIR"
}
trap cleanup EXIT

REDIS=0; { want 1 || want 3; } && REDIS=1     # the Redis anchor's sections
PKGS="gnuplot-nox"
[ $REDIS -eq 1 ] && PKGS="$PKGS redis-server libhiredis-dev"
want 6 && PKGS="$PKGS zookeeper python3-kazoo"
want 8 && PKGS="$PKGS etcd-server golang-go golang-github-jackc-pgx-v4-dev golang-etcd-server-dev"
# shellcheck disable=SC2086
"$ROOT/scripts/deps.sh" $PKGS >/dev/null
make -s -C "$ROOT/pg_ext" >/dev/null && make -s -C "$ROOT/pg_ext" install >/dev/null
gcc -O2 -Wall -o "$DIR/handoff" "$ROOT/bench/handoff.c" -I"$("${PG_CONFIG:-pg_config}" --includedir)" -lpq -lpthread
PGC=${PG_CONFIG:-pg_config}
gcc -O2 -Wall -o "$DIR/collide" "$ROOT/bench/collide.c" -I"$("$PGC" --includedir)" \
    -I"$("$PGC" --includedir-server)" -L"$("$PGC" --pkglibdir)" -lpgcommon -lpgport
if [ $REDIS -eq 1 ]; then
    gcc -O2 -Wall -o "$DIR/redis_lock" "$ROOT/bench/redis_lock.c" -lhiredis -lpthread
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
        > "$DIR/redis.log" 2>&1 &
    RPID=$!
fi

# also on 127.0.0.1 (section 8's Go driver reaches dlock over TCP, as it
# reaches etcd); the other sections use the unix socket
PG_FSYNC=on PG_EXTRA_CONF="max_connections = 300
listen_addresses = '127.0.0.1'
dlock.reap_interval = '1s'" "$ROOT/scripts/pg_cluster.sh" start "$DIR/pg" "$PORT"
export PGHOST=$DIR/pg PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
CONN="host=$PGHOST port=$PORT user=postgres dbname=postgres"
psql -X -q -c "CREATE TABLE bench_locks (name text PRIMARY KEY)"

. "$ROOT/bench/lib.sh"
write_scripts

{
echo "# dlock benchmark — $STAMP on $(hostname -s)"
echo
echo "$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | cut -d' ' -f2)."
echo "fsync on; cells of ${T} s$([ $QUICK -eq 1 ] && echo ', quick run'). Ratios are against anchors measured"
echo "in this run on this server. fdatasync on this machine kind is fast (~100 µs behind a"
echo "write-back cache): durable figures are optimistic compared with real disks."
if [ -n "$SECTIONS" ]; then echo "Only sections $SECTIONS (BENCH_SECTIONS)."; fi
} > "$RES"

# ---- 1. and 2. -------------------------------------------------------------
if want 1; then
{
echo
echo "## 1. Uncontended pairs (acquire + release, own name per client), pairs/s"
echo
echo "dlock: session locks, \`dlock_acquire(name)\` (their grants need no WAL flush: a crash ends"
echo "the session too). dlock lease: owner-keyed with a 1-minute TTL, every grant flushed to WAL"
echo "before it is acknowledged — as durable as the hand-rolled table. dlock async:"
echo "\`dlock.synchronous_commit = off\`, session locks."
echo
echo "| clients | SELECT 1 | advisory | table | dlock | dlock lease | dlock async | dlock / table | lease / table | dlock / advisory |"
echo "|---|---|---|---|---|---|---|---|---|---|"
} >> "$RES"

declare -A DL
for c in $CLIENTS; do
    s1=$(rate "$c" select1); adv=$(rate "$c" advisory); tbl=$(rate "$c" table)
    dl=$(rate "$c" dlock); dll=$(rate "$c" lease)
    set_async off; dla=$(rate "$c" dlock); set_async on
    DL[$c]=$dl
    echo "| $c | $s1 | $adv | $tbl | $dl | $dll | $dla | $(ratio "$dl" "$tbl") | $(ratio "$dll" "$tbl") | $(ratio "$dl" "$adv") |" >> "$RES"
done

{
echo
echo "Redis anchor (SET NX PX + compare-and-delete script, own key, in memory — not durable):"
echo
echo "| clients | Redis pairs/s | dlock / Redis |"
echo "|---|---|---|"
} >> "$RES"
for c in $CLIENTS; do
    read -r r_rate _ < <("$DIR/redis_lock" "$RPORT" own "$c" "$T" 0)
    echo "| $c | $r_rate | $(ratio "${DL[$c]}" "$r_rate") |" >> "$RES"
done

commits_before=$(psql -X -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
n_check=$(pgbench -n -M prepared -c 1 -t 1000 -f "$DIR/dlock.sql" 2>/dev/null | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
commits_after=$(psql -X -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
{
echo
echo "Check: pgbench counted $n_check pairs; the server's xact_commit rose by $((commits_after - commits_before)) (one per client statement, two per pair, plus the worker's own commits)."
echo
echo "## 2. Try-lock pairs at 8 clients, pairs/s"
echo
echo "| pg_try_advisory_lock | dlock_try_acquire | ratio |"
echo "|---|---|---|"
} >> "$RES"
ta=$(rate 8 try_advisory); td=$(rate 8 try_dlock)
echo "| $ta | $td | $(ratio "$td" "$ta") |" >> "$RES"
fi
# ---- end of 1. and 2. --------------------------------------------------------

# ---- 3. ----------------------------------------------------------------------
if want 3; then
{
echo
echo "## 3. Contended hand-off: one name, N clients looping acquire → hold → release"
echo
} >> "$RES"
for hold in $HOLDS; do
    first=""
    echo "| hold | N | dlock hand-offs/s | Jain | wait p50 / p99 / max ms | max / ((N+1) × mean hold) | advisory hand-offs/s | Jain | wait p50 / p99 / max ms | dlock / advisory | Redis spin-lock pairs/s (failed SETs) | Jain | dlock / Redis |" >> "$RES"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|" >> "$RES"
    for n in $WAITERS; do
        read -r d_rate d_jain d50 d99 dmax < <("$DIR/handoff" "$CONN" dlock "$n" "$T" "$hold")
        read -r a_rate a_jain a50 a99 amax < <("$DIR/handoff" "$CONN" advisory "$n" "$T" "$hold")
        read -r r_rate r_jain _ r99 _ r_failed < <("$DIR/redis_lock" "$RPORT" one "$n" "$T" "$hold")
        [ -z "$first" ] && first=$d_rate
        # FIFO bound: a waiter waits for at most the N holders ahead of it
        # and the current one; a mean hold (hand-off included) is 1/rate
        fifo=$(awk -v m="$dmax" -v n="$n" -v r="$d_rate" 'BEGIN { if (r > 0) printf "%.2f", m / ((n + 1) * 1000 / r); else print "-" }')
        echo "| $hold ms | $n | $d_rate | $d_jain | $d50 / $d99 / $dmax | $fifo | $a_rate | $a_jain | $a50 / $a99 / $amax | $(ratio "$d_rate" "$a_rate") | $r_rate ($r_failed) | $r_jain | $(ratio "$d_rate" "$r_rate") |" >> "$RES"
        echo "$n $d_rate $a_rate $r_rate $d99 $a99 $r99 $d_jain $a_jain $r_jain" >> "$DIR/plot-$hold.dat"
        last=$d_rate
    done
    echo "" >> "$RES"
    echo "Hold $hold ms: dlock hand-offs at N=$n / N=${WAITERS%% *} = $(ratio "$last" "$first")." >> "$RES"
    echo "" >> "$RES"
done
fi
# ---- end of 3. ---------------------------------------------------------------

# ---- 4. ----------------------------------------------------------------------
if want 4; then
{
echo
echo "## 4. Scale: uncontended pairs at 8 clients with other leases held"
echo
echo "Each lease has its own owner key (one lock, one holder and one owner each)."
echo
echo "| leases held | pairs/s | vs empty | worker private memory (RssAnon) MiB | dlock.held size MiB | load rate leases/s |"
echo "|---|---|---|---|---|---|"
} >> "$RES"
base=""; have=0; load_rate=0; DEADLINE=""
for held in $SCALE; do
    if [ "$held" -gt "$have" ]; then
        t0=$(date +%s.%N)
        if [ "$held" -eq "${SCALE##* }" ] && [ "$load_rate" != 0 ]; then
            # at the last step every lease runs out at one deadline: after
            # this load, the renewal of those already held and one
            # measurement, at the load rate seen so far (+50%)
            secs=$(awk -v n="$held" -v r="$load_rate" -v t="$T" 'BEGIN { printf "%d", n / r * 1.5 + t + 5 }')
            DEADLINE=$(psql -X -At -c "SELECT now() + '$secs s'")
            to_deadline="'$DEADLINE'::timestamptz - clock_timestamp()"
            load_leases $((have + 1)) "$held" "$to_deadline"
        else
            load_leases $((have + 1)) "$held" "'1 hour'"
        fi
        load_rate=$(awk -v n=$((held - have)) -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%d", n / (t1 - t0) }')
        if [ -n "$DEADLINE" ] && [ "$have" -gt 0 ]; then
            for_leases 1 "$have" "dlock_renew('scale/' || i, ttl => $to_deadline, owner => 'scale-' || i)"
        fi
        have=$held
    fi
    r=$(rate 8 dlock); [ -z "$base" ] && base=$r
    rss=$(worker_rss)
    size=$(psql -X -At -c "SELECT round(pg_total_relation_size('dlock.held') / 1048576.0)")
    echo "| $held | $r | $(ratio "$r" "$base") | $rss | $size | $([ "$held" -gt 0 ] && echo "$load_rate" || echo -) |" >> "$RES"
done

if [ -n "$DEADLINE" ]; then
    expiring=$(psql -X -At -c "SELECT count(*) FROM dlock.held WHERE expires_at < '$DEADLINE'::timestamptz + '1 min'")
    left=$(psql -X -At -c "SELECT ceil(extract(epoch FROM '$DEADLINE'::timestamptz - now()))")
    if [ "$left" -gt 1 ]; then sleep $((left - 1)); fi
    # acquire latency of 8 clients on their own names while the leases go
    window=$([ $QUICK -eq 1 ] && echo 8 || echo 20)
    "$DIR/handoff" "$CONN" dlock-own 8 "$window" 0 > "$DIR/expiry_latency" &
    lat_pid=$!
    reaped=""
    for _ in $(seq 120); do
        n=$(psql -X -At -c "SELECT count(*) FROM dlock.held WHERE expires_at < '$DEADLINE'::timestamptz + '1 min'")
        if [ "$n" -eq 0 ]; then
            reaped=$(psql -X -At -c "SELECT round(extract(epoch FROM clock_timestamp() - '$DEADLINE')::numeric, 1)")
            break
        fi
        sleep 0.5
    done
    wait $lat_pid
    read -r l_rate _ l50 l99 lmax < "$DIR/expiry_latency"
    {
    echo
    echo "Mass expiry: $expiring leases ran out at the same moment. All were reaped $([ -n "$reaped" ] && echo "$reaped s after it" || echo "NOT within 60 s") (polled every 0.5 s)."
    echo "Meanwhile 8 clients on their own names ($window s from 1 s before the deadline): $l_rate pairs/s,"
    echo "acquire latency p50 $l50 ms, p99 $l99 ms, max $lmax ms."
    echo
    } >> "$RES"
fi
fi
# ---- end of 4. ---------------------------------------------------------------

# ---- 5. MySQL/MariaDB (bench/mysql_bench.sh: its own throwaway MariaDB) ------
# the dlock UDF vs GET_LOCK and a hand-rolled InnoDB lock table, one C driver
if want 5; then
"$ROOT/bench/mysql_bench.sh" "$RES" "$T" "$CLIENTS" "$WAITERS" "$HOLDS" "$PFX-mysql-handoff.png"
fi
# ---- end of 5 -----------------------------------------------------------------

# ---- 6. Coordination services (same Python driver) -------------------------
# dlock on this server vs ZooKeeper's fair lock (kazoo Lock), both from one
# Python driver, a process per client.  bench/coord.py starts its own
# ZooKeeper (own zoo.cfg and data dir under $DIR, 127.0.0.1, forceSync=yes)
# and stops it by pid at the end, also on failure or SIGTERM.
if want 6; then
echo >> "$RES"
/usr/bin/python3 "$ROOT/bench/coord.py" $([ $QUICK -eq 1 ] && echo --quick) --seconds "$T" \
    --zk-port "${BENCH_ZK_PORT:-2191}" --workdir "$DIR" >> "$RES"
fi
# ---- end of 6 -----------------------------------------------------------------

# ---- 7. Adversarial names and crowds (bench/adversarial.sh) ---------------------
export DIR T
if ! want 7; then :
elif [ $QUICK -eq 1 ]; then "$ROOT/bench/adversarial.sh" "$RES" 3000 4000
else "$ROOT/bench/adversarial.sh" "$RES" 30000 40000; fi
# ---- end of 7 -----------------------------------------------------------------

# ---- 8. dlock vs etcd (bench/coordgo: one Go driver for both) ----------------
# The fair, durable lock most new systems pick, measured beside dlock with
# the same Go program (bench/coordgo/main.go, built offline against Debian's
# Go sources by bench/coordgo/build.sh): one process per cell, a goroutine
# per client, each client with a connection of its own — for dlock a pgx
# (database/sql) connection over TCP to 127.0.0.1, for etcd a clientv3
# client (its own gRPC connection) and a concurrency.Session (a lease,
# TTL 60 s, kept alive in the background).
#   etcd: Debian's etcd-server 3.4, one member started here with its own
#   data dir under $DIR (the same disk as PostgreSQL's), client and peer
#   URLs on 127.0.0.1 private ports (BENCH_ETCD_PORT, BENCH_ETCD_PEER_PORT),
#   default fsync (every raft entry fdatasync'ed before it is applied),
#   stopped by pid in cleanup (also on failure).  Lock = concurrency.Mutex
#   (a put of the session's key under the lock's prefix and a watch on the
#   key just before it: FIFO by create revision, no herd), unlock = a delete;
#   election = concurrency.Election Campaign / Resign (the same scheme).
#   dlock, the fair counterpart: owner-keyed leases with a 60 s TTL
#   (dlock_acquire(name, ttl => '60 s', owner => key) / dlock_release(name,
#   key); dlock_campaign(name, value, ttl =>, owner =>) / dlock_release):
#   like an etcd session's lock it outlives a vanished client until its
#   TTL, and like etcd's put every grant is flushed before it is
#   acknowledged. The ratio is on these. Session locks (dlock_acquire(name):
#   no flush, they end with the connection) are shown beside them — a lock
#   etcd has no equivalent of.
# Cells (hold 0; full 5 s cells, quick 2 s): uncontended pairs at $CLIENTS
# clients (own name each), hand-off on one name at $WAITERS waiters,
# election turnover (campaign → resign) among $WAITERS candidates; wait =
# the acquire/campaign call; Jain over per-client counts (as bench_stats.h).
# Check: etcd's revision must move by 2 per pair (put + delete).
# What bounds etcd here (docs/performance.md): uncontended, two raft entries
# per pair (~1.2 ms at one client); contended and elections, a timer — a
# waiter's watch starts at a revision the server already reached, lands in
# the watch store's unsynced group and is caught up every 100 ms, so
# hand-offs come in 100 ms rounds (p50 wait ≈ 100 ms from 8 waiters on).
if want 8; then
ET=$([ $QUICK -eq 1 ] && echo 2 || echo 5)
"$ROOT/bench/coordgo/build.sh" "$DIR/coordgo" 2>"$DIR/coordgo-build.log" ||
    { cat "$DIR/coordgo-build.log" >&2; exit 1; }
if (exec 3<>"/dev/tcp/127.0.0.1/$EPORT") 2>/dev/null || (exec 3<>"/dev/tcp/127.0.0.1/$EPEER") 2>/dev/null; then
    echo "run.sh: 127.0.0.1:$EPORT or :$EPEER already serves something; set BENCH_ETCD_PORT/BENCH_ETCD_PEER_PORT" >&2
    exit 1
fi
mkdir -p "$DIR/etcd"
etcd --name dlock-bench --data-dir "$DIR/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$EPORT" --advertise-client-urls "http://127.0.0.1:$EPORT" \
    --listen-peer-urls "http://127.0.0.1:$EPEER" --initial-advertise-peer-urls "http://127.0.0.1:$EPEER" \
    --initial-cluster "dlock-bench=http://127.0.0.1:$EPEER" --initial-cluster-state new \
    --logger zap --log-level warn > "$DIR/etcd/etcd.log" 2>&1 &
EPID=$!
for i in $(seq 30); do
    "$DIR/coordgo" -backend etcd -target "127.0.0.1:$EPORT" -mode ping >/dev/null 2>&1 && break
    if ! kill -0 "$EPID" 2>/dev/null || [ "$i" -eq 30 ]; then
        echo "run.sh: etcd did not start; end of its log:" >&2; tail -20 "$DIR/etcd/etcd.log" >&2; exit 1
    fi
    sleep 1
done
EVER=$(etcd --version | awk '/^etcd Version/ {print $3}')
GCONN="host=127.0.0.1 port=$PORT user=postgres dbname=postgres"
# coordgo BACKEND MODE CLIENTS [dlock-mode] [seconds]: sets G to the words
# "rate jain p50 p99 max pairs revs" (lock names of their own per cell)
coordgo() {
    local tgt=$GCONN out; [ "$1" == etcd ] && tgt=127.0.0.1:$EPORT
    out=$("$DIR/coordgo" -backend "$1" -target "$tgt" -mode "$2" -clients "$3" \
          -seconds "${5:-$ET}" -dlock-mode "${4:-lease}" -tag "g-$1-$2-$3-${4:-lease}-$RANDOM")
    read -r -a G <<< "$out"
}
# warm-up, not counted: PostgreSQL's caches, etcd's first raft entries
coordgo etcd pairs 8 lease 1; coordgo dlock pairs 8 lease 1
w3() { echo "$3 / $4 / $5"; }   # the wait columns of a summary line
{
echo
echo "## 8. Coordination services: dlock vs etcd (same Go driver)"
echo
echo "One Go program for both (bench/coordgo), a goroutine and a connection per client, cells of"
echo "$ET s, hold 0: dlock through pgx over TCP to 127.0.0.1 on the PostgreSQL server above (fsync"
echo "on); etcd $EVER, one member (Debian's etcd-server, default fsync, its own data dir on the"
echo "same disk, 127.0.0.1), through clientv3's \`concurrency\` package: a Session (lease, TTL 60 s)"
echo "per client, \`Mutex\` Lock/Unlock (FIFO by create revision, each waiter watches its"
echo "predecessor) and \`Election\` Campaign/Resign. dlock lease = owner-keyed with a 60 s TTL"
echo "(\`dlock_acquire(name, ttl => '60 s', owner => key)\` / \`dlock_release(name, key)\`, every"
echo "grant flushed), the like of an etcd session's lock; the ratio is on it. dlock session ="
echo "\`dlock_acquire(name)\` (no flush; ends with the connection), which etcd has no equivalent of."
echo
echo "### Uncontended pairs (acquire + release, own name per client), pairs/s"
echo
echo "| clients | dlock lease | acquire p50 / p99 / max ms | dlock session | etcd Mutex | acquire p50 / p99 / max ms | lease / etcd | session / etcd |"
echo "|---|---|---|---|---|---|---|---|"
} >> "$RES"
check=""
for c in $CLIENTS; do
    coordgo dlock pairs "$c"; L=("${G[@]}")
    coordgo dlock pairs "$c" session; S=("${G[@]}")
    coordgo etcd pairs "$c"; E=("${G[@]}")
    [ -z "$check" ] && check="$c ${E[5]} ${E[6]}"
    echo "| $c | ${L[0]} | $(w3 "${L[@]}") | ${S[0]} | ${E[0]} | $(w3 "${E[@]}") | $(ratio "${L[0]}" "${E[0]}") | $(ratio "${S[0]}" "${E[0]}") |" >> "$RES"
done
read -r cc cpairs crevs <<< "$check"
{
echo
echo "Check: at c=$cc the driver made $cpairs etcd pairs (warm-up and overtime included); the server's"
echo "revision rose by $crevs (expected $((2 * cpairs)): a put and a delete per pair)$([ "$crevs" -eq $((2 * cpairs)) ] || echo ' — MISMATCH')."
echo
echo "### Contended hand-off: one name, N clients looping acquire → release (hold 0)"
echo
echo "| N | dlock lease hand-offs/s | Jain | wait p50 / p99 / max ms | dlock session | etcd Mutex hand-offs/s | Jain | wait p50 / p99 / max ms | lease / etcd | session / etcd |"
echo "|---|---|---|---|---|---|---|---|---|---|"
} >> "$RES"
for n in $WAITERS; do
    coordgo dlock handoff "$n"; L=("${G[@]}")
    coordgo dlock handoff "$n" session; S=("${G[@]}")
    coordgo etcd handoff "$n"; E=("${G[@]}")
    echo "| $n | ${L[0]} | ${L[1]} | $(w3 "${L[@]}") | ${S[0]} | ${E[0]} | ${E[1]} | $(w3 "${E[@]}") | $(ratio "${L[0]}" "${E[0]}") | $(ratio "${S[0]}" "${E[0]}") |" >> "$RES"
    echo "$n ${L[0]} ${S[0]} ${E[0]}" >> "$DIR/plot-etcd.dat"
done
{
echo
echo "### Election turnover: N candidates on one election looping campaign → resign"
echo
echo "| N | dlock campaigns won/s (lease) | Jain | campaign p50 / p99 / max ms | etcd Campaign won/s | Jain | campaign p50 / p99 / max ms | dlock / etcd |"
echo "|---|---|---|---|---|---|---|---|"
} >> "$RES"
for n in $WAITERS; do
    coordgo dlock election "$n"; L=("${G[@]}")
    coordgo etcd election "$n"; E=("${G[@]}")
    echo "| $n | ${L[0]} | ${L[1]} | $(w3 "${L[@]}") | ${E[0]} | ${E[1]} | $(w3 "${E[@]}") | $(ratio "${L[0]}" "${E[0]}") |" >> "$RES"
    echo "$n ${L[0]} ${E[0]}" >> "$DIR/plot-etcd-election.dat"
done
kill "$EPID"; wait "$EPID" 2>/dev/null || true; EPID=
fi
# ---- end of 8 -----------------------------------------------------------------

# gnuplot's opening of a hand-offs/s-by-waiters plot: OUTPUT TITLE KEY-PLACE
handoff_axes() {
    printf 'set terminal png size 800,480 noenhanced\nset output "%s"\nset title "%s"\n' "$1" "$2"
    printf 'set xlabel "waiters"; set ylabel "hand-offs/s"; set logscale x 2; set key %s\nset yrange [0:*]\n' "$3"
}
if command -v gnuplot >/dev/null && [ -s "$DIR/plot-0.dat" ]; then
    PNG=$PFX-handoff.png
    LAT=$PFX-wait.png
    FAIR_HOLD=${HOLDS##* }  # spin-locks grow unfair when the lock is held a while
    gnuplot <<GP
$(handoff_axes "$PNG" "Contended hand-off, hold 0 ms (higher and flatter is better)" "bottom left")
plot "$DIR/plot-0.dat" using 1:2 with linespoints title "dlock", \\
     "$DIR/plot-0.dat" using 1:3 with linespoints title "pg_advisory_lock", \\
     "$DIR/plot-0.dat" using 1:4 with linespoints title "Redis SET NX spin-lock (not durable)"
set output "$LAT"
set terminal png size 1000,440 noenhanced
set multiplot layout 1,2
set title "Wait p99, hold 0 ms (lower is better)"
set ylabel "ms"; set logscale y 10; set yrange [*:*]; set key top left
plot "$DIR/plot-0.dat" using 1:5 with linespoints title "dlock", \\
     "$DIR/plot-0.dat" using 1:6 with linespoints title "advisory", \\
     "$DIR/plot-0.dat" using 1:7 with linespoints title "Redis spin-lock"
set title "Fairness, hold $FAIR_HOLD ms: Jain's index over clients (1 = fair)"
unset logscale y; set yrange [0:1.05]; set ylabel "Jain"; set key bottom left
plot "$DIR/plot-$FAIR_HOLD.dat" using 1:8 with linespoints title "dlock", \\
     "$DIR/plot-$FAIR_HOLD.dat" using 1:9 with linespoints title "advisory", \\
     "$DIR/plot-$FAIR_HOLD.dat" using 1:10 with linespoints title "Redis spin-lock"
unset multiplot
GP
    printf '\n![hand-off plot](%s)\n\n![wait and fairness plot](%s)\n' "$(basename "$PNG")" "$(basename "$LAT")" >> "$RES"
fi
if command -v gnuplot >/dev/null && [ -s "$DIR/plot-zk-0.dat" ]; then
    ZPNG=$PFX-zk-handoff.png
    ZPLOT=""                 # a dlock and a ZooKeeper line per hold
    for h in $HOLDS; do
        ZPLOT="$ZPLOT${ZPLOT:+, }\"$DIR/plot-zk-$h.dat\" using 1:2 with linespoints title \"dlock, hold $h ms\", \
\"$DIR/plot-zk-$h.dat\" using 1:3 with linespoints title \"ZooKeeper, hold $h ms\""
    done
    gnuplot <<GP
$(handoff_axes "$ZPNG" "Contended hand-off, dlock vs ZooKeeper, one Python driver" "top right")
plot $ZPLOT
GP
    printf '\n![dlock vs ZooKeeper hand-off plot](%s)\n' "$(basename "$ZPNG")" >> "$RES"
fi
if command -v gnuplot >/dev/null && [ -s "$DIR/plot-etcd.dat" ]; then
    EPNG=$PFX-etcd-handoff.png
    gnuplot <<GP
$(handoff_axes "$EPNG" "Contended hand-off and election turnover, dlock vs etcd, one Go driver" "bottom right")
set ylabel "hand-offs/s (turnovers/s), log scale"; set logscale y 10; set yrange [*:*]
plot "$DIR/plot-etcd.dat" using 1:2 with linespoints title "dlock lease (owner key, TTL)", \\
     "$DIR/plot-etcd.dat" using 1:3 with linespoints title "dlock session lock", \\
     "$DIR/plot-etcd.dat" using 1:4 with linespoints title "etcd concurrency.Mutex", \\
     "$DIR/plot-etcd-election.dat" using 1:2 with linespoints dashtype 2 title "dlock campaign/resign (lease)", \\
     "$DIR/plot-etcd-election.dat" using 1:3 with linespoints dashtype 2 title "etcd Election campaign/resign"
GP
    printf '\n![dlock vs etcd hand-off plot](%s)\n' "$(basename "$EPNG")" >> "$RES"
fi

echo
cat "$RES"
echo
echo "written to $RES"
