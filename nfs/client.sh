#!/usr/bin/env bash
# nfs/client.sh - mount the raytrain share on one node (Debian/Ubuntu, nfs-common), now and at every boot.
#
# usage: sudo nfs/client.sh [options] SERVER
#   SERVER               the NFS server's address or hostname, as this node reaches it
#   --export DIR         the exported directory on the server (default /nfsroot; env NFS_EXPORT)
#   --mount-point DIR    where to mount it here (default: the same path as --export; env MOUNT_POINT)
#   --options OPTS       mount options (default nolock; env NFS_OPTIONS); the fstab line adds _netdev
#   --no-fstab           mount now only; leave the fstab alone
#   --dry-run            print what would be done; change nothing
#   -h, --help           this text
# env: FSTAB (default /etc/fstab)
#
# Runs `mkdir -p DIR && mount -t nfs -o OPTS SERVER:EXPORT DIR` unless something is mounted at DIR already
# (then it says what), and puts the fstab line in place of an older line for DIR (else appends it).
# Idempotent. `raytrain cluster up` does the same mount when cluster.yaml has storage.nfs.
# Example: sudo nfs/client.sh 192.168.1.10
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
NFS_EXPORT=${NFS_EXPORT:-/nfsroot}
MOUNT_POINT=${MOUNT_POINT:-}
NFS_OPTIONS=${NFS_OPTIONS:-nolock}
FSTAB=${FSTAB:-/etc/fstab}
DRY_RUN=0
WRITE_FSTAB=1
SERVER=

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
log() { printf 'client.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
run() {  # run CMD...: or print it with --dry-run
  if [ "$DRY_RUN" = 1 ]; then printf '+ %s\n' "$*"; else "$@"; fi
}

while [ $# -gt 0 ]; do
  case $1 in
    --export) NFS_EXPORT=${2:?--export needs a directory}; shift 2 ;;
    --mount-point) MOUNT_POINT=${2:?--mount-point needs a directory}; shift 2 ;;
    --options) NFS_OPTIONS=${2:?--options needs a value}; shift 2 ;;
    --no-fstab) WRITE_FSTAB=0; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$SERVER" ] || die "one SERVER only (got $SERVER and $1)"; SERVER=$1; shift ;;
  esac
done
MOUNT_POINT=${MOUNT_POINT:-$NFS_EXPORT}

[ -n "$SERVER" ] || die "name the NFS server (see --help)"
[[ $SERVER =~ ^([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])$ ]] || die "SERVER must be a hostname or an address: $SERVER"
for dir in "$NFS_EXPORT" "$MOUNT_POINT"; do
  [[ $dir =~ ^/[A-Za-z0-9._/-]*$ ]] || die "paths must be absolute, of letters, digits and ._/-: $dir"
done
[[ $NFS_OPTIONS =~ ^[A-Za-z0-9_=.,:/+-]+$ ]] || die "--options must be a comma-separated list without spaces: $NFS_OPTIONS"
SHARE="$SERVER:$NFS_EXPORT"

# 1. The client package (mount.nfs).
if dpkg-query -W -f='${Status}' nfs-common 2>/dev/null | grep -q 'install ok installed'; then
  log "nfs-common is installed"
else
  run apt-get update -qq
  run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nfs-common
fi

# 2. The mount, unless something is mounted there already.
if mounted=$(findmnt -n -o SOURCE,FSTYPE --mountpoint "$MOUNT_POINT"); then
  printf 'already mounted: %s (%s)\n' "$MOUNT_POINT" "$mounted"
  [ "${mounted%% *}" = "$SHARE" ] || log "warning: $MOUNT_POINT holds ${mounted%% *}, not $SHARE; left as it is"
else
  run mkdir -p "$MOUNT_POINT"
  run mount -t nfs -o "$NFS_OPTIONS" "$SHARE" "$MOUNT_POINT"
  if [ "$DRY_RUN" = 0 ]; then printf 'mounted: %s at %s\n' "$SHARE" "$MOUNT_POINT"; fi
fi

# 3. The fstab line, so the share comes back after a reboot.
if [ "$WRITE_FSTAB" = 1 ]; then
  LINE=$(sed -e '/^#/d' -e "s|@SERVER@|$SERVER|" -e "s|@EXPORT@|$NFS_EXPORT|" \
    -e "s|@MOUNT_POINT@|$MOUNT_POINT|" -e "s|@OPTIONS@|$NFS_OPTIONS|" "$HERE/fstab.template")
  new=$(mktemp)
  trap 'rm -f "$new"' EXIT
  if [ -f "$FSTAB" ]; then
    awk -v dir="$MOUNT_POINT" -v line="$LINE" '
      $2 == dir && $1 !~ /^#/ { if (!done) print line; done = 1; next }
      { print }
      END { if (!done) print line }' "$FSTAB" >"$new"
  else
    printf '%s\n' "$LINE" >"$new"
  fi
  if [ -f "$FSTAB" ] && cmp -s "$new" "$FSTAB"; then
    log "$FSTAB already has: $LINE"
  elif [ "$DRY_RUN" = 1 ]; then
    printf '+ write to %s: %s\n' "$FSTAB" "$LINE"
  else
    cat "$new" >"$FSTAB"  # in place: keeps the file's owner, mode and links
    log "wrote to $FSTAB: $LINE"
  fi
fi
