#!/bin/sh
# SPDX-License-Identifier: PostgreSQL
# rss.sh save PIDFILE FILE | rss.sh grew PIDFILE FILE MAX_KB: note mariadbd's
# resident memory, or fail if it grew by more than MAX_KB since it was noted.
rss() { awk '/^VmRSS/ {print $2}' "/proc/$(cat "$1")/status"; }
case "$1" in
save) rss "$2" > "$3" ;;
grew)
	before=$(cat "$3"); now=$(rss "$2")
	echo "mariadbd grew by less than $4 kB: $([ $((now - before)) -lt "$4" ] && echo yes || echo "no ($((now - before)) kB)")" ;;
*) exit 2 ;;
esac
