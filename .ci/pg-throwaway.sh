#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for test runs: Debian's binaries, a data
# directory of its own, trust authentication on 127.0.0.1 only, fsync on (so that
# figures measured on it are a real disk's). `start DIR` prints its base URL,
# postgres://postgres@127.0.0.1:PORT; `stop DIR` stops it. DIR is created; as root the
# cluster runs as the postgres user, so DIR and its parent must be readable by it.
#
# PG_THROWAWAY_FSYNC=off starts it without fsync, for test runs only: PostgreSQL
# still writes its log and moves its flush position as it does with fsync (what the
# tests check), and the data survives a killed server, but not a machine that
# loses power. The store's tests on it take about two thirds of the time.
set -euo pipefail
cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "no PostgreSQL installed (apt-get install postgresql)" >&2; exit 1; }
# initdb refuses to run as root.
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
fsync=${PG_THROWAWAY_FSYNC:-on}
case $fsync in on | off) ;; *) echo "PG_THROWAWAY_FSYNC is on or off, not $fsync" >&2; exit 2 ;; esac
case $cmd in
start)
  mkdir -p "$dir"
  chmod 755 "$dir" "$(dirname "$dir")"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
  run "'$bin/initdb' -D '$dir/data' -U postgres --auth=trust -E UTF8 >'$dir/initdb.log' 2>&1" ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  # A random port, tried again on another if something already listens there.
  for _ in 1 2 3 4 5; do
    port=$((40000 + RANDOM % 20000))
    if run "'$bin/pg_ctl' -D '$dir/data' -o \"-p $port -k '$dir' -c listen_addresses=127.0.0.1 -c fsync=$fsync\" -l '$dir/pg.log' -w start >/dev/null"; then
      echo "$port" >"$dir/port"
      echo "postgres://postgres@127.0.0.1:$port"
      exit 0
    fi
  done
  cat "$dir/pg.log" >&2
  exit 1
  ;;
stop)
  [ -d "$dir/data" ] || exit 0
  run "'$bin/pg_ctl' -D '$dir/data' -m fast -w stop >/dev/null" || true
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
