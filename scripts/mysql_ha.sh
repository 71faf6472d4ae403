#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/mysql_ha.sh — a throwaway MariaDB primary with one semi-synchronous
# replica on loopback, both with the dlock plugin, and a scripted failover.
#
#   mysql_ha.sh start DIR PORT_BASE [--netns PREFIX]
#                                    node 0 (primary, port PORT_BASE) and node
#                                    1 (replica, PORT_BASE + 1), GTID replication
#   mysql_ha.sh promote DIR NODE [--no-fence]
#                                    fence the other node (kill -9 of its
#                                    mariadbd if it runs; --no-fence: leave it,
#                                    as when it is cut off and out of reach) and
#                                    make NODE the primary: its replica threads
#                                    applied all they received, stopped and
#                                    reset, semi-sync master on, read_only off.
#                                    Its lock manager takes over at the next
#                                    call, no restart.  Exits 3 (after the fence,
#                                    nothing else changed) when NODE is not in
#                                    step: it started last while behind the
#                                    primary and has not applied all it had then
#                                    (note_start); restart the primary instead
#   mysql_ha.sh rejoin DIR NODE      NODE (the old primary) back as the replica
#                                    of the current primary, rebuilt (below)
#   mysql_ha.sh kill DIR NODE        kill -9 of NODE's mariadbd (a crash)
#   mysql_ha.sh restart DIR NODE     start NODE again with its own data, in the
#                                    role it has (a replica after a crash)
#   mysql_ha.sh stop DIR             stop both (clean, then SIGKILL), by pid
#   mysql_ha.sh status DIR           one line per node: role, pid, port, GTID
#   mysql_ha.sh primary DIR          the primary's node number
#
# With --netns PREFIX (scripts/netns.sh) node N runs in network namespace
# PREFIXnN at 10.232.0.(N + 1), on a bridge in PREFIXhub; replication runs
# over that bridge, and clients come from namespaces of their own:
#   mysql_ha.sh client DIR NAME      namespace PREFIXNAME on the bridge at the
#                                    next address from 10.232.0.101; prints
#                                    "NAMESPACE ADDRESS"
#   mysql_ha.sh addr DIR NAME        the address of n0, n1 or a client
#   mysql_ha.sh cut DIR A B          drops every packet between A and B
#   mysql_ha.sh isolate DIR A        cuts A from every other node and client
#   mysql_ha.sh heal DIR [A B]       removes that cut; without A B every cut
# Clients log in over TCP as dlock_test (password dlock_test, every right:
# a throwaway cluster); the harness keeps using the unix sockets, which no
# cut touches.  stop removes the namespaces.
#
# Node N lives in DIR/nN (bench/mysql_server.sh's layout: socket DIR/nN/sock,
# log DIR/nN/server.log), server_id 1 for node 0 and a new one at every
# rebuild (DIR/nN/server_id), TCP on 127.0.0.1 only (--netns: the bridge).  Clients:
# mariadb -S DIR/nN/sock -u root.  Replication runs as 'repl'@'127.0.0.1'.
#
# The settings that make a grant on the primary wait for the replica:
#   rpl_semi_sync_master_enabled = ON (the primary; a replica gets it at its
#     promotion), rpl_semi_sync_slave_enabled = ON (both),
#   rpl_semi_sync_master_wait_point = AFTER_SYNC: a commit is durable in the
#     binary log and received by the replica before it is visible,
#   rpl_semi_sync_master_timeout = 18446744073709551615 (ms, the largest
#     value; a wait that long never times out).  After a timeout MariaDB
#     falls back to asynchronous replication without a word to the client -
#     the dlock manager notices that (Rpl_semi_sync_master_no_tx) and holds
#     its answers back anyway, but every other application would not,
#   rpl_semi_sync_master_wait_no_slave = ON: without a replica commits wait
#     (OFF would go asynchronous the moment the replica disconnects),
#   binlog_format = ROW, sync_binlog = 1, log_slave_updates = ON (a promoted
#     replica's binary log holds the whole history),
#   replicate_ignore_table = dlock.held_session, dlock.queue_live: the
#     MEMORY tables of session locks and waiting calls are not applied on the
#     replica (those sessions end with a failover; a restarted replica would
#     stop at the first change to a row it lost), their writes are still
#     received and acknowledged,
#   read_only = ON on the replica: its lock manager refuses calls (1290),
#   gtid_strict_mode = OFF: a read of dlock's MEMORY tables on a replica
#     after its restart makes it log a TRUNCATE of its own (MariaDB does so
#     for every MEMORY table), which strict mode would turn into a stop.
#
# Why rejoin rebuilds: the old primary's binary log may end in changes the
# replica never acknowledged.  MariaDB can cut such a tail at a restart
# (--init-rpl-role=SLAVE), but refuses to when a MEMORY table's statement
# follows it ("Cannot truncate the binary log ... unsafe statement") - and
# the lock manager writes MEMORY tables all the time; a plain restart keeps
# the tail, a divergence.  So NODE becomes a copy of the new primary's data:
# the primary is stopped cleanly for the copy (its commits wait for a
# replica until then anyway, so nothing was granted on it that the stop could
# end), started again read-only while its position is read - its lock
# manager refuses calls meanwhile, writes nothing - and opened for writes once
# NODE replicates from that position.  A real deployment would restore a
# mariadb-backup of the new primary instead.  (Replaying the primary's whole
# history from the pair's first data took minutes after a long run: every
# dlock answer waits until the replica caught up.)  Until a replica is back,
# the new primary's commits - and so every dlock answer - wait.
#
# Extra mariadbd options for both nodes: $MY_HA_OPTS.  Stops nothing it did
# not start: every kill is by the pid in a node's pid file, checked against
# that node's datadir.
set -eu
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
SERVER=$ROOT/bench/mysql_server.sh
cmd=${1:?usage: mysql_ha.sh start|promote|rejoin|kill|restart|stop|status|primary|client|addr|cut|isolate|heal DIR [PORT_BASE|NODE|NAME]}
DIR=${2:?DIR}
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac

# shellcheck source=scripts/netns.sh
. "$ROOT/scripts/netns.sh"
NETNS_LIST=$DIR/namespaces
NET=10.232.0
prefix() { cat "$DIR/netns_prefix" 2>/dev/null || true; }
node_dir() { echo "$DIR/n$1"; }
port_of() { echo $(( $(cat "$DIR/port_base") + $1 )); }
primary() { cat "$DIR/primary"; }
# a node's server_id: node 0 starts as 1, every rebuild takes a new one
server_id_of() { cat "$(node_dir "$1")/server_id" 2>/dev/null || echo $(( $1 + 1 )); }
sql() { local n=$1; shift; mariadb -S "$(node_dir "$n")/sock" -u root -NB "$@"; }
# one field of SHOW SLAVE STATUS (by name: -N would drop the names)
slave_field() { mariadb -S "$(node_dir "$1")/sock" -u root -e "SHOW SLAVE STATUS\G" |
                sed -n "s/^ *$2: *//p"; }
die() { echo "mysql_ha.sh: $*" >&2; exit 1; }

# NAME (n0, n1 or a client) -> its namespace / its address (netns mode)
ns_of() {
    case "$1" in
    n0|n1) echo "$(prefix)$1" ;;
    *) grep -q "^$1:" "$DIR/clients" 2>/dev/null || die "unknown node or client: $1"
       echo "$(prefix)$1" ;;
    esac
}
addr_of() {
    case "$1" in
    n0|n1) echo "$NET.$(( ${1#n} + 1 ))" ;;
    *) local k; k=$(sed -n "s/^$1://p" "$DIR/clients" 2>/dev/null)
       [ -n "$k" ] || die "unknown node or client: $1"
       echo "$NET.$((100 + k))" ;;
    esac
}
all_names() { echo n0; echo n1; sed 's/:.*//' "$DIR/clients" 2>/dev/null || true; }
# where node N's replica connects to it
host_of() { if [ -n "$(prefix)" ]; then addr_of "n$1"; else echo 127.0.0.1; fi; }
need_netns() { [ -n "$(prefix)" ] || die "$cmd needs a pair started with --netns"; }
cut_pair() { netns_cut "$(ns_of "$1")" "$(addr_of "$2")"; netns_cut "$(ns_of "$2")" "$(addr_of "$1")"; }

# every node's options; the role's come after
COMMON="--log-bin=mysql-bin --relay-log=relay-bin --binlog-format=ROW --sync-binlog=1 \
--log-slave-updates=ON --gtid-strict-mode=OFF --slave-net-timeout=10 \
--rpl-semi-sync-slave-enabled=ON --rpl-semi-sync-master-wait-point=AFTER_SYNC \
--rpl-semi-sync-master-timeout=18446744073709551615 --rpl-semi-sync-master-wait-no-slave=ON \
--replicate-ignore-table=dlock.held_session --replicate-ignore-table=dlock.queue_live \
--innodb-log-file-size=64M"

# start_node N ROLE: mariadbd of node N as primary or replica, with its data
start_node() {
    local n=$1 role=$2 opts
    opts="--server-id=$(server_id_of "$n") $COMMON"
    if [ "$role" = setup ]; then
        opts="$opts --rpl-semi-sync-master-enabled=OFF"
    elif [ "$role" = primary ]; then
        opts="$opts --rpl-semi-sync-master-enabled=ON --read-only=OFF"
    elif [ "$role" = closed-primary ]; then
        opts="$opts --rpl-semi-sync-master-enabled=ON --read-only=ON"
    else
        opts="$opts --rpl-semi-sync-master-enabled=OFF --read-only=ON"
    fi
    if [ -n "$(prefix)" ]; then
        MY_NETNS=$(ns_of "n$n") MY_EXTRA_OPTS="$opts --bind-address=$(addr_of "n$n") ${MY_HA_OPTS:-}" \
            "$SERVER" start "$(node_dir "$n")" "$(port_of "$n")" >/dev/null
    else
        MY_EXTRA_OPTS="$opts ${MY_HA_OPTS:-}" "$SERVER" start "$(node_dir "$n")" "$(port_of "$n")" >/dev/null
    fi
}

# replicate N FROM GTID: node N replicates from node FROM, starting after GTID
replicate() {
    local n=$1 from=$2 gtid=$3
    sql "$n" -e "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL gtid_slave_pos = '$gtid';
        CHANGE MASTER TO master_host = '$(host_of "$from")', master_port = $(port_of "$from"),
            master_user = 'repl', master_password = 'repl', master_connect_retry = 1,
            master_use_gtid = slave_pos;
        START SLAVE;"
    # connected and acknowledging: the primary counts a semi-sync replica
    for _ in $(seq 300); do
        [ "$(sql "$from" -e "SHOW STATUS LIKE 'Rpl_semi_sync_master_clients'" | cut -f2)" = 1 ] && return 0
        sleep 0.1
    done
    die "node $n did not connect to node $from as a semi-synchronous replica: $(slave_field "$n" Last_IO_Error)"
}

# note_start N: before replica N starts, the primary's binary log position:
# N may be promoted only once it applied everything up to there.  A GTID
# replica's start deletes its relay logs - the changes it had received but
# not yet applied, acknowledged ones among them - and fetches them again from
# the primary; were the primary lost before that, they would be lost with it
# (our failover check saw tokens handed out twice after a replica restarted
# behind and was then promoted)
note_start() {
    local p; p=$(primary)
    if [ "$p" != "$1" ] && "$SERVER" status "$(node_dir "$p")" >/dev/null 2>&1; then
        sql "$p" -e "SELECT @@gtid_binlog_pos" > "$(node_dir "$1")/must_reach"
    else
        echo unknown > "$(node_dir "$1")/must_reach"
    fi
}

# rebuild N: node N afresh as a copy of the primary's data, its replica
rebuild() {
    local n=$1 p d pd gtid
    p=$(primary)
    d=$(node_dir "$n")
    pd=$(node_dir "$p")
    # a fence as well: an old primary may still run, cut off
    "$SERVER" kill "$d" || true
    rm -rf "$d/data"
    "$SERVER" status "$pd" >/dev/null || die "the primary (node $p) is not running"
    "$SERVER" stop "$pd"
    mkdir "$d/data"
    # without the binary and relay logs and the replica's state files
    tar -C "$pd/data" --exclude='./mysql-bin.*' --exclude='./relay-bin.*' \
        --exclude='./master.info' --exclude='./relay-log.info' --exclude='./*.pid' -cf - . |
        tar -C "$d/data" -xf -
    cp -p "$pd/dlock.cnf" "$d/dlock.cnf"
    # read-only while its position is read: nothing writes (its lock manager
    # refuses calls), so the copy ends exactly there
    start_node "$p" closed-primary
    gtid=$(sql "$p" -e "SELECT @@gtid_binlog_pos")
    [ -n "$gtid" ] || die "the primary (node $p) shows no binary log position"
    # A new server_id: a replica skips every event that carries its own id
    # (MariaDB's guard against loops); a node that once wrote as primary
    # must not skip its old events should it ever replay them
    echo $(( $(cat "$DIR/last_server_id") + 1 )) > "$DIR/last_server_id"
    cp "$DIR/last_server_id" "$d/server_id"
    echo "$gtid" > "$d/must_reach"
    start_node "$n" replica
    # its binary log starts where the copy ends: a replica of it asking for
    # that position later (the next failover) finds it here even when no
    # change was logged since (MEMORY-table rows are not)
    sql "$n" -e "RESET MASTER; SET GLOBAL gtid_binlog_state = '$gtid'"
    replicate "$n" "$p" "$gtid"
    sql "$p" -e "SET GLOBAL read_only = OFF"
}

case "$cmd" in
start)
    PORT=${3:?PORT_BASE}
    pfx=
    if [ "${4:-}" = --netns ]; then
        pfx=${5:?--netns PREFIX}
        [[ "$pfx" =~ ^[A-Za-z0-9_-]{1,10}$ ]] || die "PREFIX: letters, digits, _ and -, at most 10"
    fi
    [ -e "$DIR/n0" ] && die "$DIR/n0 exists already"
    mkdir -p "$DIR"; chmod 755 "$DIR"
    echo "$PORT" > "$DIR/port_base"
    echo 1 > "$DIR/last_server_id"
    clients_from=127.0.0.1
    if [ -n "$pfx" ]; then
        "$ROOT/scripts/deps.sh" nftables >&2
        for x in hub n0 n1; do
            [ -e "/run/netns/$pfx$x" ] && die "network namespace $pfx$x exists already (another pair with this prefix?)"
        done
        echo "$pfx" > "$DIR/netns_prefix"
        : > "$DIR/clients"
        netns_hub "${pfx}hub" "$NET.254/24"
        for x in 0 1; do
            netns_add "${pfx}n$x"
            netns_join "${pfx}hub" "${pfx}n$x" "v-n$x" "$(addr_of "n$x")/24"
        done
        clients_from=$NET.%
    fi
    # node 0 alone first, not yet waiting for a replica: install dlock and
    # the accounts; node 1 is then made from a copy of its data
    start_node 0 setup
    sql 0 -e "CREATE USER 'repl'@'$clients_from' IDENTIFIED BY 'repl';
              GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'$clients_from'"
    [ -n "$pfx" ] && sql 0 -e "CREATE USER 'dlock_test'@'$NET.%' IDENTIFIED BY 'dlock_test';
                               GRANT ALL ON *.* TO 'dlock_test'@'$NET.%'"
    echo 0 > "$DIR/primary"
    mkdir -p "$(node_dir 1)"; chmod 755 "$(node_dir 1)"
    rebuild 1
    ;;
promote)
    n=${3:?NODE}
    [ "$n" = 0 ] || [ "$n" = 1 ] || die "NODE is 0 or 1"
    other=$((1 - n))
    # fence: the other node's sessions hold session locks and may not go on
    # (--no-fence: it is out of reach; its commits wait for an acknowledgement
    # that cannot come, so it answers nothing more, and rejoin kills it)
    [ "${4:-}" = --no-fence ] || "$SERVER" kill "$(node_dir "$other")"
    "$SERVER" status "$(node_dir "$n")" >/dev/null || die "node $n is not running"
    # everything received is applied before the replica threads stop
    sql "$n" -e "STOP SLAVE IO_THREAD" 2>/dev/null || true
    io=$(slave_field "$n" Gtid_IO_Pos)
    if [ -n "$io" ]; then
        r=$(sql "$n" -e "SELECT MASTER_GTID_WAIT('$io', 120)")
        [ "$r" = 0 ] || die "node $n did not apply what it received ($io): $(slave_field "$n" Last_SQL_Error)"
    fi
    # (no Gtid_IO_Pos: nothing received since its start; the check below
    # tells whether it has all it needs)
    # in step with the old primary: everything it acknowledged before this
    # node's last start was fetched again and applied (note_start)
    need=$(cat "$(node_dir "$n")/must_reach" 2>/dev/null || echo unknown)
    if [ "$need" = unknown ] || [ "$(sql "$n" -e "SELECT MASTER_GTID_WAIT('$need', 0)")" != 0 ]; then
        sql "$n" -e "START SLAVE IO_THREAD" 2>/dev/null || true
        echo "mysql_ha.sh: node $n is not in step with the primary: it started last while the" \
             "primary was at $need and has applied only up to" \
             "$(sql "$n" -e "SELECT @@gtid_slave_pos"); the changes in between, acknowledged" \
             "grants among them, exist only on the primary: restart the primary" \
             "(mysql_ha.sh restart DIR $other) instead of promoting node $n" >&2
        exit 3
    fi
    sql "$n" -e "STOP SLAVE; RESET SLAVE ALL;
                 SET GLOBAL rpl_semi_sync_master_enabled = ON;
                 SET GLOBAL read_only = OFF"
    echo "$n" > "$DIR/primary"
    ;;
rejoin)
    n=${3:?NODE}
    [ "$(primary)" != "$n" ] || die "node $n is the primary"
    rebuild "$n"
    ;;
kill)
    n=${3:?NODE}
    "$SERVER" kill "$(node_dir "$n")"
    ;;
restart)
    n=${3:?NODE}
    if [ "$(primary)" = "$n" ]; then
        start_node "$n" primary
    else
        note_start "$n"
        start_node "$n" replica
    fi
    ;;
stop)
    for n in 0 1; do
        [ -d "$(node_dir $n)" ] && "$SERVER" stop "$(node_dir $n)"
    done
    netns_remove
    exit 0
    ;;
client)
    need_netns
    name=${3:?client DIR NAME}
    [[ "$name" =~ ^[a-z][a-z0-9_]{0,9}$ ]] && [ "$name" != hub ] && [ "$name" != n0 ] &&
        [ "$name" != n1 ] || die "client NAME: a lower-case letter, then letters, digits or _; at most 10"
    if ! grep -q "^$name:" "$DIR/clients"; then
        k=$(( $(wc -l < "$DIR/clients") + 1 ))
        netns_add "$(prefix)$name"
        netns_join "$(prefix)hub" "$(prefix)$name" "vc$k" "$NET.$((100 + k))/24"
        echo "$name:$k" >> "$DIR/clients"
    fi
    echo "$(ns_of "$name") $(addr_of "$name")"
    ;;
addr)
    need_netns
    addr_of "${3:?addr DIR NAME}"
    ;;
cut)
    need_netns
    [ "${3:?cut DIR A B}" != "${4:?cut DIR A B}" ] || die "cannot cut $3 from itself"
    cut_pair "$3" "$4"
    ;;
isolate)
    need_netns
    a=${3:?isolate DIR A}
    ns_of "$a" >/dev/null
    for b in $(all_names); do [ "$b" = "$a" ] || cut_pair "$a" "$b"; done
    ;;
heal)
    need_netns
    if [ $# -ge 4 ]; then
        netns_heal "$(ns_of "$3")" "$(addr_of "$4")"; netns_heal "$(ns_of "$4")" "$(addr_of "$3")"
    else
        for a in $(all_names); do netns_heal "$(ns_of "$a")"; done
    fi
    ;;
status)
    p=$(primary 2>/dev/null || echo '?')
    for n in 0 1; do
        d=$(node_dir $n)
        role=replica; [ "$p" = "$n" ] && role=primary
        if st=$("$SERVER" status "$d" 2>/dev/null); then
            gtid=$(sql $n -e "SELECT @@gtid_current_pos" 2>/dev/null || echo '?')
            ro=$(sql $n -e "SELECT @@read_only" 2>/dev/null || echo '?')
            echo "node $n: $role, $st, port $(port_of $n), server_id $(server_id_of $n), read_only $ro, gtid $gtid"
        else
            echo "node $n: $role, stopped"
        fi
    done
    ;;
primary)
    primary
    ;;
*)
    echo "unknown command $cmd" >&2; exit 2 ;;
esac
