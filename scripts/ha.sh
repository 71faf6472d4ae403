#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/ha.sh — a throwaway three-node Patroni cluster of PostgreSQL 15 with
# dlock, on a three-member etcd, on this one machine; optionally every node in
# a network namespace of its own, so that tests can cut the links between them.
#
#   ha.sh start DIR [--netns PREFIX]
#                       installs what is missing (patroni, etcd-server,
#                       python3-etcd, nftables), starts etcd members n1..n3 and
#                       Patroni nodes n1..n3 (PostgreSQL in DIR/node1..3), waits
#                       until there is a leader with two streaming replicas, one
#                       of them synchronous, and dlock answers on the leader;
#                       CREATE EXTENSION dlock is Patroni's post_bootstrap.  The
#                       last line (the only one on stdout) is the multi-host
#                       libpq connection string for clients.  Gives up after
#                       $HA_START_TIMEOUT s (default 85) with the end of the
#                       relevant logs, and then stops what it started (unless
#                       HA_KEEP_ON_FAILURE=1).  A DIR that holds a stopped
#                       cluster of ours is started afresh (its node directories
#                       are removed); any other non-empty DIR is refused.
#       default:        everything on 127.0.0.1; ports from $HA_PORT_BASE
#                       (default 5800, B): PostgreSQL B+1..B+3, Patroni REST
#                       B+11..B+13, etcd clients B+21..B+23, etcd peers B+31..B+33.
#       --netns PREFIX: namespace PREFIXhub holds a bridge (and 10.231.0.254,
#                       from where this script looks at the cluster), namespaces
#                       PREFIXn1..PREFIXn3 are joined to it by veth pairs with
#                       10.231.0.1..3/24; etcd, Patroni and PostgreSQL of node N
#                       run in PREFIXnN bound to 10.231.0.N (same ports as
#                       above).  The root namespace gets no address or route:
#                       reach PostgreSQL by its unix socket (DIR/nodeN, see
#                       `socket`) or run programs in a namespace (`exec`).
#   ha.sh stop DIR      stops the Patroni nodes (SIGTERM, then SIGKILL), every
#                       postmaster (as pg_cluster.sh stop does), etcd, whatever
#                       still runs in our namespaces or on our data directories,
#                       and removes the namespaces.  Only recorded pids and
#                       processes on DIR's own paths are signalled.  Works after
#                       a partial start and after kill -9.  DIR (logs, data) stays.
#   ha.sh status DIR    patronictl list
#   ha.sh leader DIR [WAIT]
#                       the leader's node name (n1..n3) as the DCS has it (the
#                       leader key, read with quorum from etcd);
#                       waits up to WAIT seconds (default 0) for there to be one;
#                       exit 1 if there is none
#   ha.sh socket DIR NODE
#                       "SOCKETDIR PORT" of the node's PostgreSQL: DIR/nodeN and
#                       its port (the symlinked path below if DIR/nodeN is too
#                       long for a socket); SOCKETDIR may contain spaces, so
#                       split at the last one: ${line% *} and ${line##* }
#   ha.sh pids DIR NODE "POSTMASTER PATRONI ETCD": the node's live pids, "-" for
#                       one that is not running
#   ha.sh connstr DIR   the connection string again
#   ha.sh revive DIR NODE
#                       starts the node's etcd and Patroni again where they are
#                       not running (after kill -9); Patroni restarts or adopts
#                       PostgreSQL and rejoins, with pg_rewind if needed
#   ha.sh exec DIR NAME CMD...
#                       runs CMD (as root) in the namespace of node NAME (n1..n3),
#                       of a client, or "hub"; without --netns just runs CMD
#   ha.sh client DIR NAME           (--netns only)
#                       makes namespace PREFIXNAME joined to the bridge with the
#                       next address 10.231.0.101, .102, ...; prints
#                       "NAMESPACE ADDRESS" (again, if NAME exists already)
#   ha.sh cut DIR A B [A B ...]     (--netns only)
#                       drops every packet between A and B (nodes n1..n3 or
#                       clients), in both namespaces' input and output (nft
#                       table inet dlock_ha); idempotent
#   ha.sh isolate DIR A cuts A from every other node and client
#   ha.sh heal DIR [A B]
#                       removes the cut between A and B; without them every cut
#
# Node names are n1..n3 everywhere (node1..node3 are accepted as well); their
# files are DIR/nodeN: data/, etcd/ (etcd's data), patroni.yml, patroni.log,
# etcd.log, postgresql.log, patroni.pid, etcd.pid.  DIR/ha.env records the
# cluster for the other commands.  Patroni, PostgreSQL and etcd run as the
# postgres user, so DIR's parents must be traversable (/tmp/... is).
# Patroni cannot take a socket directory with a space (PostgreSQL needs it
# double-quoted in unix_socket_directories, which Patroni does not parse), and
# a socket path must fit in 107 bytes: when DIR has characters other than
# [A-Za-z0-9/._-] or is longer than 70, the servers are configured through a
# symlink /tmp/dlock-ha-HASH -> DIR (removed by stop).
# Patroni's timing: HA_TTL (default 15), HA_LOOP_WAIT (1), HA_RETRY_TIMEOUT (3)
# seconds; keep HA_LOOP_WAIT + 2 * (HA_RETRY_TIMEOUT + 2) well below HA_TTL
# (see patroni_yml).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PGBIN=/usr/lib/postgresql/15/bin
NET=10.231.0
HUBADDR=$NET.254
SCOPE=dlock-ha
# Patroni's timing, in seconds (see patroni_yml for why these numbers)
HA_TTL=${HA_TTL:-15}
HA_LOOP_WAIT=${HA_LOOP_WAIT:-1}
HA_RETRY_TIMEOUT=${HA_RETRY_TIMEOUT:-3}
[ $((HA_LOOP_WAIT + 2 * (HA_RETRY_TIMEOUT + 2))) -lt "$HA_TTL" ] ||
    { echo "ha.sh: HA_LOOP_WAIT + 2 * (HA_RETRY_TIMEOUT + 2) must be below HA_TTL" >&2; exit 2; }

die() { echo "ha.sh: $*" >&2; exit 1; }
# shellcheck source=scripts/netns.sh
. "$ROOT/scripts/netns.sh"
say() { echo "ha.sh: $*" >&2; }
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

cmd=${1:-}; [ -n "$cmd" ] || usage
[ $# -ge 2 ] || usage
DIR=$2
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac
DIR=${DIR%/}
NETNS_LIST=$DIR/namespaces
shift 2

# ---------------------------------------------------------------- helpers

# as the postgres user, from / (a cwd it cannot enter makes programs complain)
as_pg() { (cd / && runuser -u postgres -- "$@"); }

pg_port()    { echo $((BASE + $1)); }
rest_port()  { echo $((BASE + 10 + $1)); }
etcd_cport() { echo $((BASE + 20 + $1)); }
etcd_pport() { echo $((BASE + 30 + $1)); }
node_addr()  { if [ "$MODE" = netns ]; then echo "$NET.$1"; else echo 127.0.0.1; fi; }

# n1 | node1 -> 1
node_idx() {
    case "$1" in n[123]) echo "${1#n}" ;; node[123]) echo "${1#node}" ;; *) return 1 ;; esac
}

save_state() {
    { printf 'MODE=%q\n' "$MODE"; printf 'PREFIX=%q\n' "$PREFIX"
      printf 'BASE=%q\n' "$BASE"; printf 'SAFE=%q\n' "$SAFE"
      printf 'CLIENTS=%q\n' "$CLIENTS"; } > "$DIR/ha.env.new"
    mv "$DIR/ha.env.new" "$DIR/ha.env"
}
load_state() {
    [ -f "$DIR/ha.env" ] || die "no cluster of ha.sh in $DIR"
    MODE='' PREFIX='' BASE='' SAFE='' CLIENTS=''
    # shellcheck disable=SC1091
    . "$DIR/ha.env"
}

# NAME -> namespace (netns mode): n1..n3, node1..3, hub, or a client
ns_of() {
    local i
    if i=$(node_idx "$1"); then echo "${PREFIX}n$i"
    elif [ "$1" = hub ]; then echo "${PREFIX}hub"
    elif client_k "$1" >/dev/null; then echo "$PREFIX$1"
    else return 1; fi
}
# NAME -> address in netns mode
addr_of() {
    local i k
    if i=$(node_idx "$1"); then echo "$NET.$i"
    elif [ "$1" = hub ]; then echo "$HUBADDR"
    elif k=$(client_k "$1"); then echo "$NET.$((100 + k))"
    else return 1; fi
}
# a client's number k (address 10.231.0.(100+k))
client_k() {
    local c
    for c in $CLIENTS; do
        [ "${c%%:*}" = "$1" ] && { echo "${c#*:}"; return 0; }
    done
    return 1
}
client_names() { local c; for c in $CLIENTS; do echo "${c%%:*}"; done; }

# run a command in NAME's namespace (netns mode) or here
in_ns() {
    local name=$1; shift
    if [ "$MODE" = netns ]; then
        local ns; ns=$(ns_of "$name") || die "unknown node or client: $name"
        ip netns exec "$ns" "$@"
    else
        "$@"
    fi
}

# the command prefix that puts a daemon of node N into its namespace
ns_prefix() { if [ "$MODE" = netns ]; then echo "ip netns exec ${PREFIX}n$1"; fi; }

# is PID alive and does its command line contain STRING?
pid_is() {
    local pid=$1 want=$2 cl
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    cl=$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline") || return 1
    [[ "$cl" == *"$want"* ]]
}
readpid() { head -1 "$1" 2>/dev/null || true; }

# the node's live pids (empty if not running)
live_pid() { if pid_is "$1" "$2"; then echo "$1"; fi; }
patroni_pid() { live_pid "$(readpid "$DIR/node$1/patroni.pid")" "$SAFE/node$1/patroni.yml"; }
etcd_pid()    { live_pid "$(readpid "$DIR/node$1/etcd.pid")" "$SAFE/node$1/etcd"; }
pm_pid()      { live_pid "$(readpid "$DIR/node$1/data/postmaster.pid")" "-D $SAFE/node$1/data"; }

# start a daemon detached (own session, stdin from /dev/null, output to LOG)
# and record its pid in PIDFILE: the sh writes its own pid and execs, and so
# do ip netns exec, env and setpriv, so the recorded pid is the daemon's
launch() {
    local pidfile=$1 log=$2; shift 2
    rm -f "$pidfile"
    # shellcheck disable=SC2016
    (cd / && exec setsid sh -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "$@" \
        </dev/null >>"$log" 2>&1 &)
    local i
    for i in $(seq 50); do [ -s "$pidfile" ] && return 0; sleep 0.1; done
    die "could not start $*"
}
# what launch runs for a postgres-owned daemon of node N
as_pg_daemon() {
    local n=$1; shift
    # shellcheck disable=SC2046
    echo $(ns_prefix "$n") env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME=/var/lib/postgresql \
        setpriv --reuid=postgres --regid=postgres --init-groups
}

# psql to node N by its unix socket, tuples only
psql_node() {
    local n=$1; shift
    PGCONNECT_TIMEOUT=3 "$PGBIN/psql" -X -q -A -t -h "$SAFE/node$n" -p "$(pg_port "$n")" \
        -U postgres -d postgres "$@"
}

patronictl_() {
    in_ns hub /usr/bin/patronictl -c "$SAFE/node1/patroni.yml" "$@"
}

conn_string() {
    local hosts="" ports="" n
    for n in 1 2 3; do
        hosts=$hosts${hosts:+,}$(node_addr "$n"); ports=$ports${ports:+,}$(pg_port "$n")
    done
    # connect_timeout: a host behind a cut drops the SYN, and libpq would
    # wait for TCP's own timeout (minutes) before it tries the next host
    echo "host=$hosts port=$ports dbname=postgres user=postgres target_session_attrs=read-write connect_timeout=2"
}

# ---------------------------------------------------------------- start parts

# install what is missing; a packaged etcd or patroni service that the
# postinst started (it does where invoke-rc.d may start services) is stopped:
# our members run on their own ports and data
install_deps() {
    local fresh=() p
    for p in etcd-server patroni; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || fresh+=("$p")
    done
    "$ROOT/scripts/deps.sh" patroni etcd-server python3-etcd nftables >&2
    for p in ${fresh[@]+"${fresh[@]}"}; do
        p=${p%-server}
        if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
            systemctl stop "$p" 2>/dev/null || true
        elif [ -x "/etc/init.d/$p" ]; then
            "/etc/init.d/$p" stop >/dev/null 2>&1 || true
        fi
    done
    # still one (ps)? the sysv script keeps its pid in /run/etcd.pid
    if [ ${#fresh[@]} -gt 0 ] && pgrep -u etcd -x etcd >/dev/null 2>&1; then
        p=$(readpid /run/etcd.pid)
        if [ -n "$p" ] && [ "$(stat -c %U "/proc/$p" 2>/dev/null)" = etcd ]; then
            kill "$p" 2>/dev/null || true
        fi
        pgrep -u etcd -x etcd >/dev/null 2>&1 &&
            say "warning: a packaged etcd still runs (pid $(pgrep -u etcd -x etcd | tr '\n' ' '))"
    fi
    return 0
}

# the namespaces (scripts/netns.sh); the hub is PREFIXhub
setup_netns() {
    local n
    for n in hub n1 n2 n3; do
        [ -e "/run/netns/$PREFIX$n" ] && die "network namespace $PREFIX$n exists already (another cluster with this prefix?)"
    done
    netns_hub "${PREFIX}hub" "$HUBADDR/24"
    for n in 1 2 3; do
        netns_add "${PREFIX}n$n"
        netns_join "${PREFIX}hub" "${PREFIX}n$n" "v-n$n" "$NET.$n/24"
    done
}

etcd_start() {
    local n=$1 a cluster="" i
    for i in 1 2 3; do
        cluster=$cluster${cluster:+,}n$i=http://$(node_addr "$i"):$(etcd_pport "$i")
    done
    a=$(node_addr "$n")
    # --pre-vote: a member cut off and healed does not depose the leader with
    # its inflated term; heartbeat 100 ms, election 1 s (etcd's defaults)
    # shellcheck disable=SC2046
    launch "$DIR/node$n/etcd.pid" "$DIR/node$n/etcd.log" $(as_pg_daemon "$n") \
        /usr/bin/etcd --name "n$n" --data-dir "$SAFE/node$n/etcd" \
        --listen-client-urls "http://$a:$(etcd_cport "$n")" \
        --advertise-client-urls "http://$a:$(etcd_cport "$n")" \
        --listen-peer-urls "http://$a:$(etcd_pport "$n")" \
        --initial-advertise-peer-urls "http://$a:$(etcd_pport "$n")" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        --initial-cluster-token "$SCOPE-$BASE-$$" \
        --heartbeat-interval 100 --election-timeout 1000 --pre-vote \
        --auto-compaction-mode periodic --auto-compaction-retention 10m \
        --enable-v2=true --logger zap --log-outputs stderr
}

patroni_yml() {
    local n=$1 a i hosts="" cidr
    a=$(node_addr "$n")
    for i in 1 2 3; do hosts="$hosts  - $(node_addr "$i"):$(etcd_cport "$i")
"; done
    if [ "$MODE" = netns ]; then cidr=$NET.0/24; else cidr=127.0.0.1/32; fi
    cat <<YML
# Patroni node n$n of the throwaway cluster made by scripts/ha.sh
scope: $SCOPE
namespace: /service/
name: n$n

restapi:
  listen: $a:$(rest_port "$n")
  connect_address: $a:$(rest_port "$n")

# etcd's v2 API (etcd runs with --enable-v2=true; python3-etcd is the client),
# not the etcd3 section: Patroni 3.0.2's etcd3 code renews a leader key whose
# lease ran out by writing it unconditionally (fixed upstream after 3.0.2:
# Patroni pull request 2689, May 2023).  Seen here: an old leader cut off
# until its key expired, healed after another node took over, read its own
# stale etcd member ("Lock owner: n1"), overwrote the new leader's key and
# promoted itself to the same timeline number; the new leader's acknowledged
# grants were lost and it then followed the diverged history.  The v2 code
# updates the key only while it holds our name (prevValue), so such a node
# demotes instead.
etcd:
  hosts:
${hosts}
bootstrap:
  dcs:
    # Timing (seconds).  The old leader must demote before its key expires
    # (then a new leader may be promoted).  Its last successful renewal is at
    # t0; the key lives until t0 + ttl or later (etcd counts from when it got
    # the renewal).  Patroni's rule loop_wait + 2 * retry_timeout <= ttl
    # assumes its DCS read and key update each give up after retry_timeout,
    # but Patroni 3.0.2's etcd client, once every member failed, also asks
    # the others for the member list (1 s each) before it gives up: with three
    # members a cut-off leader took 5 s per operation and demoted 10.0 s after
    # t0 (measured, ttl 10: the new leader was promoted only 2.4 s later).
    # Bound: loop_wait + 2 * (retry_timeout + 2) = $HA_LOOP_WAIT + 2 * ($HA_RETRY_TIMEOUT + 2) = $((HA_LOOP_WAIT + 2 * (HA_RETRY_TIMEOUT + 2))) s, plus the
    # shutdown, against ttl $HA_TTL.  loop_wait 1 and retry_timeout 3 are the smallest
    # values Patroni documents; 3.0.2 accepts a ttl below the 20 that later
    # versions enforce (they raise it to 20 and warn).  A failover after
    # kill -9 of the leader takes about ttl + 3 s.
    ttl: $HA_TTL
    loop_wait: $HA_LOOP_WAIT
    retry_timeout: $HA_RETRY_TIMEOUT
    # only a replica within 1 MiB of the leader may take over (in synchronous
    # mode Patroni promotes only the synchronous standby anyway)
    maximum_lag_on_failover: 1048576
    # no acknowledged commit without a synchronous standby, and only that
    # standby may be promoted: a lock granted (committed) on the leader is on
    # the node that takes over
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        shared_preload_libraries: dlock
        dlock.database: postgres
        dlock.reap_interval: 100ms
        # on = remote flush: a commit (a grant) is acknowledged only once the
        # synchronous standby - the one Patroni will promote - has it on disk,
        # so every acknowledged grant survives a failover.  remote_apply would
        # only be needed to read dlock.locks on a standby right after a grant.
        synchronous_commit: 'on'
        wal_log_hints: 'on'
        fsync: 'on'
        max_connections: 200
        # a peer behind a cut is noticed after 5 s rather than 60
        wal_sender_timeout: 5s
        wal_receiver_timeout: 5s
        # a replica retries its primary (or a new one) every second, not 5
        wal_retrieve_retry_interval: 1s
        log_line_prefix: '%m [%p] '
        log_min_messages: info
  initdb:
  - encoding: UTF8
  - locale: C.UTF-8
  # Patroni runs it with a connection string added (and
  # PGOPTIONS=-c synchronous_commit=local) once the bootstrapped leader is up
  post_bootstrap: $PGBIN/psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION IF NOT EXISTS dlock'

postgresql:
  listen: $a:$(pg_port "$n")
  connect_address: $a:$(pg_port "$n")
  data_dir: $SAFE/node$n/data
  bin_dir: $PGBIN
  pgpass: $SAFE/node$n/pgpass
  use_unix_socket: true
  # a throwaway test cluster: trust on the unix socket and on the cluster's
  # own addresses.  Real machines use scram-sha-256 with passwords here
  # (authentication.*.password) and hostssl lines in pg_hba.
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
    rewind:
      username: postgres
  pg_hba:
  - local all all trust
  - local replication all trust
  - host all all $cidr trust
  - host replication all $cidr trust
  basebackup:
  - checkpoint: fast
  parameters:
    unix_socket_directories: $SAFE/node$n
    logging_collector: 'on'
    log_directory: $SAFE/node$n
    log_filename: postgresql.log
    log_file_mode: '0644'
    log_rotation_age: 0
    log_rotation_size: 0

watchdog:
  mode: 'off'
YML
}

patroni_start() {
    local n=$1
    # shellcheck disable=SC2046
    launch "$DIR/node$n/patroni.pid" "$DIR/node$n/patroni.log" $(as_pg_daemon "$n") \
        /usr/bin/patroni "$SAFE/node$n/patroni.yml"
}

show_logs() {
    local f
    for f in "$@"; do
        [ -f "$f" ] || continue
        echo "--- end of $f:" >&2
        tail -n 15 "$f" >&2
    done
}

# until DEADLINE: a leader (primary per PostgreSQL and per Patroni), two
# streaming replicas, one synchronous, and dlock granting on the leader
wait_ready() {
    local deadline=$1 n leader why sync
    while :; do
        why=
        leader=
        for n in 1 2 3; do
            [ "$(psql_node "$n" -c "select pg_is_in_recovery()" 2>/dev/null)" = f ] && leader=$n
        done
        if [ -z "$leader" ]; then
            why="no primary"
        elif [ "$(in_ns hub curl -s -o /dev/null -w '%{http_code}' -m 2 \
                  "http://$(node_addr "$leader"):$(rest_port "$leader")/primary" 2>/dev/null)" != 200 ]; then
            why="Patroni of n$leader does not report it as the leader yet"
        else
            case "$(psql_node "$leader" -c "select count(*) filter (where state = 'streaming'),
                        count(*) filter (where sync_state = 'sync') from pg_stat_replication" 2>/dev/null)" in
            2\|1) sync=$(psql_node "$leader" -c "select application_name from pg_stat_replication
                                                where sync_state = 'sync'" 2>/dev/null)
                  # and Patroni has named it the synchronous standby in the
                  # DCS (only that one may be promoted)
                  if ! sync=$(node_idx "$sync") ||
                     [ "$(in_ns hub curl -s -o /dev/null -w '%{http_code}' -m 2 \
                          "http://$(node_addr "$sync"):$(rest_port "$sync")/sync" 2>/dev/null)" != 200 ]; then
                      why="Patroni has not yet made n${sync:-?} the synchronous standby"
                  elif [ "$(psql_node "$leader" -c "set statement_timeout = '5s'" \
                      -c "select dlock_try_acquire('ha/probe') > 0" \
                      -c "select dlock_release('ha/probe')" 2>/dev/null | tr '\n' ' ')" = "t t " ]; then
                      echo "$leader"; return 0
                  else
                      why="dlock does not grant on n$leader"
                  fi ;;
            *) why="n$leader has not two streaming replicas, one synchronous" ;;
            esac
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            say "the cluster did not come up in time: $why"
            in_ns hub /usr/bin/patronictl -c "$SAFE/node1/patroni.yml" list >&2 2>&1 || true
            for n in 1 2 3; do
                show_logs "$DIR/node$n/patroni.log" "$DIR/node$n/postgresql.log"
            done
            return 1
        fi
        sleep 0.5
    done
}

etcd_healthy() {
    [ "$(in_ns hub curl -s -m 2 "http://$(node_addr "$1"):$(etcd_cport "$1")/health" 2>/dev/null)" = \
      '{"health":"true"}' ]
}

# ---------------------------------------------------------------- stop

# SIGTERM the pids, wait up to SECS for them to go, then SIGKILL
term_wait_kill() {
    local secs=$1 p i alive; shift
    [ $# -gt 0 ] || return 0
    kill "$@" 2>/dev/null || true
    for i in $(seq $((secs * 10))); do
        alive=
        for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && return 0
        sleep 0.1
    done
    kill -9 "$@" 2>/dev/null || true
    sleep 0.3
}

do_stop() {
    local n p pids=() ns i cl real
    # Patroni first, all at once (so that none of them takes over or restarts
    # PostgreSQL); a Patroni stops its own PostgreSQL on SIGTERM
    for n in 1 2 3; do p=$(patroni_pid "$n"); [ -n "$p" ] && pids+=("$p"); done
    term_wait_kill 20 ${pids[@]+"${pids[@]}"}
    # PostgreSQL whose Patroni was killed: as pg_cluster.sh stop does
    for n in 1 2 3; do
        [ -f "$SAFE/node$n/data/postmaster.pid" ] || continue
        p=$(pm_pid "$n")
        [ -n "$p" ] || continue
        as_pg "$PGBIN/pg_ctl" -D "$SAFE/node$n/data" -m fast -t 20 stop >/dev/null 2>&1 ||
            as_pg "$PGBIN/pg_ctl" -D "$SAFE/node$n/data" -m immediate -t 10 stop >/dev/null 2>&1 ||
            { pid_is "$p" "-D $SAFE/node$n/data" && kill -9 "$p"; sleep 0.5; } || true
    done
    pids=()
    for n in 1 2 3; do p=$(etcd_pid "$n"); [ -n "$p" ] && pids+=("$p"); done
    # (etcd members stopped together wait for one another: 8 s and more)
    term_wait_kill 3 ${pids[@]+"${pids[@]}"}
    # leftovers working on our paths (a pg_basebackup or pg_rewind of a killed
    # Patroni, a postmaster of a stale pid file): only our own directories match
    pids=()
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] && continue
        cl=$(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline") || continue
        for n in 1 2 3; do
            case "$cl" in
            *"$SAFE/node$n/data"*|*"$SAFE/node$n/patroni.yml"*|*"$SAFE/node$n/etcd"*)
                case "$cl" in *ha.sh*) ;; *) pids+=("$p") ;; esac ;;
            esac
        done
    done
    # and processes working in our data directories (backends of a postmaster
    # killed with -9 that have not noticed yet: their cwd is the data dir)
    real=$(realpath "$DIR" 2>/dev/null || echo "$DIR")
    for p in $(pgrep -u postgres 2>/dev/null); do
        cl=$(readlink "/proc/$p/cwd" 2>/dev/null) || continue
        for n in 1 2 3; do
            case "$cl" in "$real/node$n/data"|"$real/node$n/data/"*) pids+=("$p") ;; esac
        done
    done
    term_wait_kill 5 ${pids[@]+"${pids[@]}"}
    # namespaces we made: whatever still runs in them is ours
    netns_remove
    if [ "$SAFE" != "$DIR" ] && [ -L "$SAFE" ] && [ "$(readlink "$SAFE")" = "$DIR" ]; then
        rm -f "$SAFE"
    fi
    for i in 1 2 3; do rm -f "$DIR/node$i/patroni.pid" "$DIR/node$i/etcd.pid"; done
    return 0
}

any_alive() {
    local n
    for n in 1 2 3; do
        [ -n "$(patroni_pid "$n")$(etcd_pid "$n")$(pm_pid "$n")" ] && return 0
    done
    [ -s "$DIR/namespaces" ]
}

# ---------------------------------------------------------------- nft cuts

cut_one() { netns_cut "$(ns_of "$1")" "$(addr_of "$2")"; }   # in A's namespace, drop B
heal_one() { netns_heal "$(ns_of "$1")" "$(addr_of "$2")"; }
check_name() {
    { ns_of "$1" >/dev/null && [ "$1" != hub ]; } || die "unknown node or client: $1 (nodes n1..n3, clients: $(client_names | tr '\n' ' '))"
    if i=$(node_idx "$1"); then echo "n$i"; else echo "$1"; fi
}
need_netns() { [ "$MODE" = netns ] || die "$cmd needs a cluster started with --netns"; }
all_names() { echo n1; echo n2; echo n3; client_names; }

# ---------------------------------------------------------------- commands


case "$cmd" in
start)
    opt_mode=local opt_prefix=
    while [ $# -gt 0 ]; do
        case "$1" in
        --netns) [ $# -ge 2 ] || die "--netns PREFIX"; opt_mode=netns; opt_prefix=$2; shift 2 ;;
        *) die "unknown argument $1" ;;
        esac
    done
    if [ "$opt_mode" = netns ]; then
        [[ "$opt_prefix" =~ ^[A-Za-z0-9_-]{1,24}$ ]] || die "PREFIX: letters, digits, _ and -, at most 24"
    fi
    opt_base=${HA_PORT_BASE:-5800}
    { [[ "$opt_base" =~ ^[0-9]+$ ]] && [ "$opt_base" -ge 1024 ] && [ "$opt_base" -le 65400 ]; } ||
        die "bad HA_PORT_BASE $opt_base"
    t0=$(date +%s)
    deadline=$((t0 + ${HA_START_TIMEOUT:-85}))
    install_deps
    [ -f "$PGBIN/../lib/dlock.so" ] || [ -f "$(pg_config --pkglibdir 2>/dev/null)/dlock.so" ] ||
        die "dlock is not installed into PostgreSQL 15 (make install)"

    # DIR: new, empty, or a stopped cluster of ours (started afresh)
    if [ -f "$DIR/ha.env" ]; then
        load_state
        any_alive && die "a cluster runs in $DIR: ha.sh stop it first"
        do_stop
        rm -rf "$DIR/node1" "$DIR/node2" "$DIR/node3" "$DIR/ha.env" "$DIR/connstr"
    elif [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
        die "$DIR is not empty (and holds no cluster of ha.sh)"
    fi
    MODE=$opt_mode PREFIX=$opt_prefix BASE=$opt_base CLIENTS=
    mkdir -p "$DIR"; chmod 755 "$DIR"
    SAFE=$DIR
    if [[ ! "$DIR" =~ ^[A-Za-z0-9/._-]+$ ]] || [ ${#DIR} -gt 70 ]; then
        SAFE=/tmp/dlock-ha-$(printf '%s' "$DIR" | md5sum | cut -c1-10)
        if [ -L "$SAFE" ] && [ "$(readlink "$SAFE")" = "$DIR" ]; then :
        elif [ -e "$SAFE" ] || [ -L "$SAFE" ]; then die "$SAFE exists (and is not our symlink to $DIR)"
        else ln -s "$DIR" "$SAFE"; fi
        say "the servers see $DIR as $SAFE (a symlink): see the header of ha.sh"
    fi
    if [ "$MODE" = local ]; then
        for n in 1 2 3; do
            for port in $(pg_port $n) $(rest_port $n) $(etcd_cport $n) $(etcd_pport $n); do
                [ -z "$(ss -Htln "sport = :$port" 2>/dev/null)" ] ||
                    die "port $port is in use (set HA_PORT_BASE; we use base+1..base+33)"
            done
        done
    fi
    save_state
    started=
    on_exit() {
        [ -n "$started" ] && return 0
        if [ "${HA_KEEP_ON_FAILURE:-0}" = 1 ]; then
            say "start failed; left as it is (HA_KEEP_ON_FAILURE=1): ha.sh stop '$DIR'"
        else
            say "start failed; stopping what was started (HA_KEEP_ON_FAILURE=1 keeps it)"
            do_stop
        fi
    }
    trap on_exit EXIT

    [ "$MODE" = netns ] && setup_netns
    for n in 1 2 3; do
        install -d -o postgres -g postgres -m 755 "$DIR/node$n"
        patroni_yml "$n" > "$DIR/node$n/patroni.yml"
        chown postgres: "$DIR/node$n/patroni.yml"
    done
    as_pg test -w "$SAFE/node1" ||
        die "the postgres user cannot write $SAFE/node1 (DIR's parents must be traversable)"

    say "starting etcd ($MODE mode)"
    for n in 1 2 3; do etcd_start "$n"; done
    for n in 1 2 3; do
        until etcd_healthy "$n"; do
            if [ -z "$(etcd_pid "$n")" ] || [ "$(date +%s)" -ge "$deadline" ]; then
                say "etcd member n$n did not come up"
                show_logs "$DIR/node$n/etcd.log"
                exit 1
            fi
            sleep 0.3
        done
    done
    say "starting Patroni (etcd up after $(( $(date +%s) - t0 )) s)"
    for n in 1 2 3; do patroni_start "$n"; done
    leader=$(wait_ready "$deadline") || exit 1
    conn=$(conn_string)
    echo "$conn" > "$DIR/connstr"
    started=1
    say "up after $(( $(date +%s) - t0 )) s: leader n$leader, two streaming replicas (one synchronous), dlock grants"
    echo "$conn"
    ;;
stop)
    [ -f "$DIR/ha.env" ] || { say "no cluster of ha.sh in $DIR"; exit 0; }
    load_state
    do_stop
    say "stopped"
    ;;
status)
    load_state
    patronictl_ list
    ;;
leader)
    load_state
    wait=${1:-0}
    [[ "$wait" =~ ^[0-9]+$ ]] || die "WAIT: seconds"
    end=$(( $(date +%s) + wait ))
    while :; do
        # the DCS's answer: the leader key, read with quorum from any etcd
        # member that is in the majority
        for n in 1 2 3; do
            out=$(in_ns hub curl -s -m 2 \
                  "http://$(node_addr "$n"):$(etcd_cport "$n")/v2/keys/service/$SCOPE/leader?quorum=true" \
                  2>/dev/null) || continue
            case "$out" in
            *'"errorCode":100'*) break ;;            # no leader key
            *'"node":'*) ;;
            *) continue ;;
            esac
            v=$(printf '%s' "$out" | grep -o '"value":"[^"]*"' | head -1 | cut -d'"' -f4)
            [ -n "$v" ] && { echo "$v"; exit 0; }
            break
        done
        [ "$(date +%s)" -ge "$end" ] && { say "no leader"; exit 1; }
        sleep 0.2
    done
    ;;
socket)
    load_state
    i=$(node_idx "${1:-}") || die "socket DIR NODE (n1..n3)"
    d=$DIR/node$i
    [ $(( ${#d} + 15 )) -le 107 ] || d=$SAFE/node$i
    echo "$d $(pg_port "$i")"
    ;;
pids)
    load_state
    i=$(node_idx "${1:-}") || die "pids DIR NODE (n1..n3)"
    pm=$(pm_pid "$i"); pa=$(patroni_pid "$i"); et=$(etcd_pid "$i")
    echo "${pm:--} ${pa:--} ${et:--}"
    ;;
revive)
    load_state
    i=$(node_idx "${1:-}") || die "revive DIR NODE (n1..n3)"
    # etcd rejoins with its data dir (--initial-cluster-state is ignored then)
    [ -n "$(etcd_pid "$i")" ] || etcd_start "$i"
    if [ -z "$(patroni_pid "$i")" ]; then
        # a postmaster left by a killed Patroni is adopted by the new one
        patroni_start "$i"
    fi
    say "n$i: etcd $(etcd_pid "$i"), Patroni $(patroni_pid "$i") running"
    ;;
connstr)
    load_state
    if [ -f "$DIR/connstr" ]; then cat "$DIR/connstr"; else conn_string; fi
    ;;
exec)
    load_state
    [ $# -ge 2 ] || die "exec DIR NAME CMD..."
    name=$1; shift
    if [ "$MODE" = netns ]; then
        ns=$(ns_of "$name") || die "unknown node or client: $name"
        exec ip netns exec "$ns" "$@"
    fi
    exec "$@"
    ;;
client)
    load_state; need_netns
    name=${1:-}
    [[ "$name" =~ ^[a-z][a-z0-9_-]{0,14}$ ]] || die "client NAME: a lower-case letter, then letters, digits, _ or -; at most 15"
    node_idx "$name" >/dev/null && die "$name is a node's name"
    [ "$name" = hub ] && die "hub is taken"
    if k=$(client_k "$name"); then
        echo "$PREFIX$name $NET.$((100 + k))"; exit 0
    fi
    k=0
    for c in $CLIENTS; do [ "${c#*:}" -gt "$k" ] && k=${c#*:}; done
    k=$((k + 1))
    [ "$k" -le 150 ] || die "too many clients"
    netns_add "$PREFIX$name" || exit 1
    netns_join "${PREFIX}hub" "$PREFIX$name" "vc$k" "$NET.$((100 + k))/24"
    CLIENTS="${CLIENTS:+$CLIENTS }$name:$k"
    save_state
    echo "$PREFIX$name $NET.$((100 + k))"
    ;;
cut)
    load_state; need_netns
    { [ $# -ge 2 ] && [ $(($# % 2)) -eq 0 ]; } || die "cut DIR A B [A B ...]"
    while [ $# -gt 0 ]; do
        a=$(check_name "$1"); b=$(check_name "$2"); shift 2
        [ "$a" != "$b" ] || die "cannot cut $a from itself"
        cut_one "$a" "$b"; cut_one "$b" "$a"
    done
    ;;
isolate)
    load_state; need_netns
    a=$(check_name "${1:?isolate DIR A}")
    for b in $(all_names); do
        [ "$b" = "$a" ] && continue
        cut_one "$a" "$b"; cut_one "$b" "$a"
    done
    ;;
heal)
    load_state; need_netns
    if [ $# -eq 0 ]; then
        for a in $(all_names); do
            netns_heal "$(ns_of "$a")"
        done
    else
        [ $# -eq 2 ] || die "heal DIR [A B]"
        a=$(check_name "$1"); b=$(check_name "$2")
        heal_one "$a" "$b"; heal_one "$b" "$a"
    fi
    ;;
*)
    usage ;;
esac
