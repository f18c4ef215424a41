#!/usr/bin/env bash
# threadline-backup: the `backup` service of docker-compose.yml (docs/deployment.md, "Backups and
# restore"). It runs beside Postgres, sharing its data volume, its socket and the pgBackRest
# repository, so that every backup is an ordinary `pgbackrest backup` an operator can read in
# `docker compose logs backup` and run by hand the same way.
#
#   threadline-backup schedule   create the stanza, take a full backup if the repository has none,
#                                then a backup every BACKUP_EVERY_HOURS (full when the newest full is
#                                BACKUP_FULL_EVERY_DAYS old, differential otherwise)
#   threadline-backup status     the health check: fails when the newest backup is older than twice
#                                BACKUP_EVERY_HOURS (none running), or WAL archiving is failing
set -euo pipefail

EVERY_HOURS=${BACKUP_EVERY_HOURS:-24}
FULL_EVERY_DAYS=${BACKUP_FULL_EVERY_DAYS:-7}
# How long a failed backup waits before it is tried again.
RETRY_MINUTES=${BACKUP_RETRY_MINUTES:-15}
SOCKET=/var/run/postgresql

say() { printf '%s threadline-backup: %s\n' "$(date -u +%FT%TZ)" "$*"; }

for name in EVERY_HOURS FULL_EVERY_DAYS RETRY_MINUTES; do
  [[ ${!name} =~ ^[1-9][0-9]*$ ]] || { say "BACKUP_$name must be a whole number above 0, not '${!name}'"; exit 2; }
done

# Sleeps in the background so that SIGTERM (docker compose stop) ends the wait at once.
child=
stop() {
  [ -z "$child" ] || kill -TERM "$child" 2>/dev/null || :
  [ -z "$child" ] || wait "$child" 2>/dev/null || :
  say "stopped"
  exit 0
}
pause() { sleep "$1" & child=$!; wait "$child" || :; child=; }
# A command in the background too: a backup interrupted by a stop is left for pgBackRest to resume.
run() { "$@" & child=$!; local rc=0; wait "$child" || rc=$?; child=; return "$rc"; }

# Seconds since the epoch at which the newest backup of TYPE (full, or any) stopped; 0 when none.
newest() {
  pgbackrest info --output=json |
    jq --arg type "$1" '[.[0].backup[]? | select($type == "any" or .type == $type) | .timestamp.stop] | max // 0'
}

schedule() {
  trap stop TERM INT
  say "waiting for Postgres on $SOCKET"
  until pg_isready -q -h "$SOCKET" -U threadline -d threadline; do pause 2; done
  # Idempotent: on an existing stanza it checks that the repository matches this cluster.
  run pgbackrest stanza-create
  while true; do
    local now full any type= wait_s
    now=$(date +%s)
    full=$(newest full)
    any=$(newest any)
    if (( now - full >= FULL_EVERY_DAYS * 86400 )); then
      type=full
    elif (( now - any >= EVERY_HOURS * 3600 )); then
      type=diff
    fi
    if [ -n "$type" ]; then
      say "taking a $type backup"
      if run pgbackrest backup --type="$type"; then
        say "$type backup done"
        continue
      fi
      say "the $type backup failed; trying again in $RETRY_MINUTES min"
      pause $((RETRY_MINUTES * 60))
      continue
    fi
    wait_s=$(( any + EVERY_HOURS * 3600 - now ))
    (( wait_s <= full + FULL_EVERY_DAYS * 86400 - now )) || wait_s=$(( full + FULL_EVERY_DAYS * 86400 - now ))
    say "next backup in $(( (wait_s + 59) / 60 )) min"
    pause "$wait_s"
  done
}

status() {
  local info now stop running message failing
  # pg_stat_archiver: a failure newer than the last success means WAL is piling up in pg_wal.
  failing=$(psql -h "$SOCKET" -U threadline -d threadline -Atc \
    "SELECT coalesce(last_failed_time > coalesce(last_archived_time, '-infinity'), false) FROM pg_stat_archiver")
  if [ "$failing" = t ]; then
    echo "WAL archiving is failing: see the postgres service's log, and pgbackrest check"
    return 1
  fi
  info=$(pgbackrest info --output=json)
  now=$(date +%s)
  stop=$(jq '[.[0].backup[]?.timestamp.stop] | max // 0' <<<"$info")
  running=$(jq '.[0].status.lock.backup.held // false' <<<"$info")
  message=$(jq -r '.[0].status.message // "no answer"' <<<"$info")
  if (( now - stop > 2 * EVERY_HOURS * 3600 )) && [ "$running" != true ]; then
    if (( stop == 0 )); then echo "no backup, and none running (pgbackrest info: $message)"; else
      echo "no backup for $(( (now - stop) / 3600 )) h, and none running (pgbackrest info: $message)"; fi
    return 1
  fi
  echo "ok: newest backup $(( (now - stop) / 60 )) min old"
}

case "${1:-}" in
  schedule) schedule ;;
  status) status ;;
  *) sed -n '7,12p' "$0" >&2; exit 2 ;;
esac
