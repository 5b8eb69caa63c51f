#!/usr/bin/env bash
# nfs/check.sh - is the raytrain share really shared? Run it from any machine that reaches the nodes by ssh.
#
# usage: nfs/check.sh [options] SERVER NODE...
#   SERVER               the NFS server's address or hostname
#   NODE                 ssh targets of the nodes (user@host or a name from ~/.ssh/config): a marker file
#                        is written on the share on the first node and read back on every other one
#   --export DIR         the export `showmount -e SERVER` must list (default /nfsroot; env NFS_EXPORT)
#   --path DIR           where the share is mounted on the nodes (default: the same as --export; env SHARE_PATH)
#   --export-dir DIR     when run on the server: the exported directory, where the marker must appear too
#   -h, --help           this text
# env: SSH, the ssh command and its options (default "ssh -o BatchMode=yes"), e.g. SSH="ssh -F lab_ssh_config"
#
# Prints each step; exits 1 naming the node (or the server) where a step failed, 2 on a usage error.
# Changes nothing but the marker, which it removes at the end.
# Example: nfs/check.sh --path /nfsroot 192.168.1.10 m8 m9
set -euo pipefail

NFS_EXPORT=${NFS_EXPORT:-/nfsroot}
SHARE_PATH=${SHARE_PATH:-}
EXPORT_DIR=
NODES=()
SERVER=
read -r -a SSH_CMD <<<"${SSH:-ssh -o BatchMode=yes}"

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { printf 'check.sh: error: %s\n' "$*" >&2; exit 2; }
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --export) NFS_EXPORT=${2:?--export needs a directory}; shift 2 ;;
    --path) SHARE_PATH=${2:?--path needs a directory}; shift 2 ;;
    --export-dir) EXPORT_DIR=${2:?--export-dir needs a directory}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) if [ -z "$SERVER" ]; then SERVER=$1; else NODES+=("$1"); fi; shift ;;
  esac
done
SHARE_PATH=${SHARE_PATH:-$NFS_EXPORT}
[ -n "$SERVER" ] || die "name the NFS server and the nodes (see --help)"
if [ ${#NODES[@]} -lt 2 ] && [ -z "$EXPORT_DIR" ]; then
  die "name two nodes or more (a marker written on one is read on the others), or one and --export-dir"
fi
[[ $SHARE_PATH =~ ^/[A-Za-z0-9._/-]*$ ]] || die "--path must be absolute, of letters, digits and ._/-: $SHARE_PATH"

# 1. The server exports the share (and to whom).
if ! listing=$(showmount -e "$SERVER" 2>&1); then
  fail "showmount -e $SERVER: $listing"
fi
printf '%s\n' "$listing"
awk -v dir="$NFS_EXPORT" 'NR > 1 && $1 == dir { found = 1 } END { exit !found }' <<<"$listing" \
  || fail "$SERVER does not export $NFS_EXPORT"
printf 'ok: %s exports %s\n' "$SERVER" "$NFS_EXPORT"

# 2. A marker written on the first node is read on every other node (and in the export directory).
TOKEN="$(hostname)-$$-$RANDOM$RANDOM"
MARKER="$SHARE_PATH/.raytrain_nfs_check_$TOKEN"
first=${NODES[0]}
cleanup() { "${SSH_CMD[@]}" "$first" "rm -f $MARKER" >/dev/null 2>&1 || true; }
trap cleanup EXIT
if ! out=$("${SSH_CMD[@]}" "$first" "printf %s $TOKEN > $MARKER" 2>&1); then
  fail "$first: cannot write $MARKER: $out"
fi
printf 'ok: %s wrote %s\n' "$first" "$MARKER"
for node in "${NODES[@]:1}"; do
  got=$("${SSH_CMD[@]}" "$node" "cat $MARKER" 2>&1) || fail "$node: cannot read $MARKER (not the same share?): $got"
  [ "$got" = "$TOKEN" ] || fail "$node: $MARKER holds '$got', not what $first wrote"
  printf 'ok: %s reads what %s wrote\n' "$node" "$first"
done
if [ -n "$EXPORT_DIR" ]; then
  got=$(cat "$EXPORT_DIR/${MARKER##*/}" 2>&1) || fail "server: the marker is not in $EXPORT_DIR: $got"
  [ "$got" = "$TOKEN" ] || fail "server: $EXPORT_DIR/${MARKER##*/} holds '$got'"
  printf 'ok: the marker is in the export directory %s\n' "$EXPORT_DIR"
fi
printf 'the share %s:%s is shared by %s\n' "$SERVER" "$NFS_EXPORT" "${NODES[*]}"
