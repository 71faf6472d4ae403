# SPDX-License-Identifier: PostgreSQL
# scripts/netns.sh — the network namespaces of the throwaway HA clusters,
# sourced by scripts/ha.sh (Patroni) and scripts/mysql_ha.sh (MariaDB).
#
# A hub namespace holds a bridge; every node and client gets a namespace of
# its own, joined to the bridge by a veth pair (eth0 inside).  Nothing is
# routed to the host's network: the addresses live only on that bridge.  A
# cut drops every packet between two addresses in one namespace's input and
# output (nft table inet dlock_ha), so a cut between A and B is made in both.
#
# The caller sets NETNS_LIST: a file that records the namespaces made, in
# order (netns_remove deletes them, and whatever still runs in them).

NETNS_NFT_TABLE="table inet dlock_ha {
    set cut { type ipv4_addr; }
    chain input { type filter hook input priority 0; policy accept; ip saddr @cut drop; }
    chain output { type filter hook output priority 0; policy accept; ip daddr @cut drop; }
}"

# netns_add NS: a new namespace with its loopback up
netns_add() {
    if [ -e "/run/netns/$1" ]; then
        echo "network namespace $1 exists already (another cluster with this prefix?)" >&2
        return 1
    fi
    ip netns add "$1"
    echo "$1" >> "$NETNS_LIST"
    ip -n "$1" link set lo up
}

# netns_hub HUB ADDR/PREFIXLEN: the hub namespace and its bridge br0
netns_hub() {
    netns_add "$1" || return 1
    ip -n "$1" link add br0 type bridge
    ip -n "$1" addr add "$2" dev br0
    ip -n "$1" link set br0 up
}

# netns_join HUB NS HUBIF ADDR/PREFIXLEN: NS joined to HUB's bridge
netns_join() {
    local hub=$1 ns=$2 hubif=$3 addr=$4
    ip -n "$hub" link add "$hubif" type veth peer name eth0 netns "$ns"
    ip -n "$hub" link set "$hubif" master br0
    ip -n "$hub" link set "$hubif" up
    ip -n "$ns" addr add "$addr" dev eth0
    ip -n "$ns" link set eth0 up
}

# netns_cut NS ADDR: in NS, drop every packet from and to ADDR (idempotent)
netns_cut() {
    ip netns exec "$1" nft list table inet dlock_ha >/dev/null 2>&1 ||
        echo "$NETNS_NFT_TABLE" | ip netns exec "$1" nft -f -
    ip netns exec "$1" nft add element inet dlock_ha cut "{ $2 }"
}

# netns_heal NS [ADDR]: NS's cut of ADDR removed; without ADDR all of NS's cuts
netns_heal() {
    if [ $# -ge 2 ]; then
        ip netns exec "$1" nft delete element inet dlock_ha cut "{ $2 }" 2>/dev/null || true
    else
        ip netns exec "$1" nft delete table inet dlock_ha 2>/dev/null || true
    fi
}

# netns_remove: every namespace in NETNS_LIST deleted, last made first, after
# whatever still runs in it was stopped (TERM, 5 s, KILL): only ours run there
netns_remove() {
    local ns pids i
    [ -f "$NETNS_LIST" ] || return 0
    for ns in $(tac "$NETNS_LIST"); do
        [ -e "/run/netns/$ns" ] || continue
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        if [ -n "${pids// /}" ]; then
            # shellcheck disable=SC2086
            kill $pids 2>/dev/null || true
            for i in $(seq 50); do
                [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
                sleep 0.1
            done
            pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
            if [ -n "${pids// /}" ]; then
                # shellcheck disable=SC2086
                kill -9 $pids 2>/dev/null || true
            fi
        fi
        ip netns del "$ns" 2>/dev/null || echo "could not remove namespace $ns" >&2
    done
    rm -f "$NETNS_LIST"
}
