"""An NFSv3 client as a FUSE file system, for test hosts whose kernel has no NFS client. Tests only.

    nfsfuse.py SERVER EXPORT MOUNTPOINT [--ready FILE]

mounts SERVER:EXPORT at MOUNTPOINT and serves it until unmounted. It speaks NFSv3 (MOUNT and NFS over TCP,
the server's ports found through its rpcbind, like mount.nfs) with Debian's libnfs (libnfs13, through
ctypes), and exposes it with FUSE (mfusepy on libfuse3). The mount shows as `SERVER:EXPORT` of type
`fuse.nfsfuse`. One thread: a libnfs context is not thread-safe. A hard mount: calls wait while the server
is away. `--ready FILE` is written once the kernel has the mount (FUSE's init), for whoever waits on it.

Not used by the package: the tests' stand-in for the kernel's NFS client (see nfslab.py).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import errno
import os
import socket
import sys
import time

import mfusepy

_u64, _ptr, _str, _int = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int


class _Stat(ctypes.Structure):  # struct nfs_stat_64
    _fields_ = [(name, _u64) for name in (
        "dev", "ino", "mode", "nlink", "uid", "gid", "rdev", "size", "blksize", "blocks",
        "atime", "mtime", "ctime", "atime_nsec", "mtime_nsec", "ctime_nsec", "used",
    )]


class _StatVfs(ctypes.Structure):  # struct nfs_statvfs_64
    _fields_ = [(name, _u64) for name in (
        "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail",
        "f_fsid", "f_flag", "f_namemax",
    )]


class _DirEntry(ctypes.Structure):  # the head of struct nfsdirent: all we read
    _fields_ = [("next", _ptr), ("name", _str), ("inode", _u64)]


class _TimeVal(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


_out = ctypes.POINTER(_ptr)
# libnfs 5 (Debian 12's libnfs13): name -> (restype, argtypes). Every call takes the context first.
_PROTOTYPES = {
    "nfs_init_context": (_ptr, []),
    "nfs_destroy_context": (None, [_ptr]),
    "nfs_get_error": (_str, [_ptr]),
    "nfs_mount": (_int, [_ptr, _str, _str]),
    "nfs_lstat64": (_int, [_ptr, _str, ctypes.POINTER(_Stat)]),
    "nfs_statvfs64": (_int, [_ptr, _str, ctypes.POINTER(_StatVfs)]),
    "nfs_open": (_int, [_ptr, _str, _int, _out]),
    "nfs_create": (_int, [_ptr, _str, _int, _int, _out]),
    "nfs_close": (_int, [_ptr, _ptr]),
    "nfs_pread": (_int, [_ptr, _ptr, _u64, _u64, _ptr]),
    "nfs_pwrite": (_int, [_ptr, _ptr, _u64, _u64, _ptr]),
    "nfs_fsync": (_int, [_ptr, _ptr]),
    "nfs_truncate": (_int, [_ptr, _str, _u64]),
    "nfs_ftruncate": (_int, [_ptr, _ptr, _u64]),
    "nfs_mkdir2": (_int, [_ptr, _str, _int]),
    "nfs_rmdir": (_int, [_ptr, _str]),
    "nfs_unlink": (_int, [_ptr, _str]),
    "nfs_rename": (_int, [_ptr, _str, _str]),
    "nfs_link": (_int, [_ptr, _str, _str]),
    "nfs_symlink": (_int, [_ptr, _str, _str]),
    "nfs_readlink": (_int, [_ptr, _str, _str, _int]),
    "nfs_chmod": (_int, [_ptr, _str, _int]),
    "nfs_chown": (_int, [_ptr, _str, _int, _int]),
    "nfs_utimes": (_int, [_ptr, _str, ctypes.POINTER(_TimeVal)]),
    "nfs_opendir": (_int, [_ptr, _str, _out]),
    "nfs_readdir": (ctypes.POINTER(_DirEntry), [_ptr, _ptr]),
    "nfs_closedir": (None, [_ptr, _ptr]),
}


def _load_libnfs():
    lib = ctypes.CDLL(ctypes.util.find_library("nfs") or "libnfs.so.13")
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class NfsClient:
    """One mounted NFS export; each method raises OSError with the server's errno on failure."""

    def __init__(self, server: str, export: str):
        self.lib = _load_libnfs()
        self.ctx = self.lib.nfs_init_context()
        if not self.ctx:
            raise OSError(errno.ENOMEM, "nfs_init_context failed")
        if self.lib.nfs_mount(self.ctx, server.encode(), export.encode()) != 0:
            raise ConnectionError(self.error())

    def error(self) -> str:
        return (self.lib.nfs_get_error(self.ctx) or b"unknown error").decode(errors="replace")

    def call(self, name: str, *args) -> int:
        rc = getattr(self.lib, name)(self.ctx, *args)
        if rc < 0:
            # libnfs returns -errno; anything out of range is a transport failure.
            raise mfusepy.FuseOSError(-rc if -rc < 4096 else errno.EIO)
        return rc


def _b(path: str) -> bytes:
    return path.encode()


class NfsFS(mfusepy.Operations):
    """FUSE operations served by one NfsClient; file handles are small integers mapped to libnfs handles."""

    use_ns = True
    # What a FUSE open may pass on to the server: access mode, truncate, sync (not O_CREAT: create does that).
    OPEN_FLAGS = os.O_ACCMODE | os.O_TRUNC | os.O_SYNC | os.O_APPEND

    def __init__(self, client: NfsClient, ready: str | None):
        self.nfs = client
        self.ready = ready
        self.handles: dict[int, ctypes.c_void_p] = {}
        self.next_handle = 0

    def init(self, path):
        if self.ready:
            with open(self.ready, "w") as fh:
                fh.write(str(os.getpid()))

    def _keep(self, handle: ctypes.c_void_p) -> int:
        self.next_handle += 1
        self.handles[self.next_handle] = handle
        return self.next_handle

    # --- attributes and directories ---------------------------------------------------------
    def getattr(self, path, fh=None):
        st = _Stat()
        self.nfs.call("nfs_lstat64", _b(path), ctypes.byref(st))
        return {
            "st_mode": st.mode, "st_ino": st.ino, "st_nlink": st.nlink, "st_uid": st.uid, "st_gid": st.gid,
            "st_size": st.size, "st_blocks": st.blocks, "st_blksize": st.blksize or 4096,
            "st_atime": st.atime * 10**9 + st.atime_nsec,
            "st_mtime": st.mtime * 10**9 + st.mtime_nsec,
            "st_ctime": st.ctime * 10**9 + st.ctime_nsec,
        }

    def readdir(self, path, fh):
        handle = ctypes.c_void_p()
        self.nfs.call("nfs_opendir", _b(path), ctypes.byref(handle))
        names = []
        try:
            while entry := self.nfs.lib.nfs_readdir(self.nfs.ctx, handle):
                names.append(entry.contents.name.decode(errors="surrogateescape"))
        finally:
            self.nfs.lib.nfs_closedir(self.nfs.ctx, handle)
        return names

    def statfs(self, path):
        vfs = _StatVfs()
        self.nfs.call("nfs_statvfs64", _b(path), ctypes.byref(vfs))
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")
        return {key: getattr(vfs, key) for key in keys}

    def mkdir(self, path, mode):
        return self.nfs.call("nfs_mkdir2", _b(path), mode)

    def rmdir(self, path):
        return self.nfs.call("nfs_rmdir", _b(path))

    def unlink(self, path):
        return self.nfs.call("nfs_unlink", _b(path))

    def rename(self, old, new):
        return self.nfs.call("nfs_rename", _b(old), _b(new))

    def link(self, target, source):
        # FUSE's order: `target` is the new name of the existing `source`.
        return self.nfs.call("nfs_link", _b(source), _b(target))

    def symlink(self, target, source):
        # FUSE's order: `target` is the link, `source` what it points to.
        return self.nfs.call("nfs_symlink", _b(source), _b(target))

    def readlink(self, path):
        buf = ctypes.create_string_buffer(4096)
        self.nfs.call("nfs_readlink", _b(path), buf, len(buf))
        return buf.value.decode(errors="surrogateescape")

    def chmod(self, path, mode):
        return self.nfs.call("nfs_chmod", _b(path), mode & 0o7777)

    def chown(self, path, uid, gid):
        return self.nfs.call("nfs_chown", _b(path), uid, gid)

    def utimens(self, path, times=None):
        atime, mtime = times if times is not None else (time.time_ns(),) * 2
        pair = (_TimeVal * 2)(*(_TimeVal(t // 10**9, t % 10**9 // 1000) for t in (atime, mtime)))
        return self.nfs.call("nfs_utimes", _b(path), pair)

    def truncate(self, path, length, fh=None):
        if fh in self.handles:
            return self.nfs.call("nfs_ftruncate", self.handles[fh], length)
        return self.nfs.call("nfs_truncate", _b(path), length)

    def access(self, path, amode):
        return 0  # default_permissions: the kernel checks modes

    # --- files ------------------------------------------------------------------------------------
    def open(self, path, flags):
        handle = ctypes.c_void_p()
        self.nfs.call("nfs_open", _b(path), flags & self.OPEN_FLAGS, ctypes.byref(handle))
        return self._keep(handle)

    def create(self, path, mode, flags):
        handle = ctypes.c_void_p()
        self.nfs.call("nfs_create", _b(path), (flags & self.OPEN_FLAGS) | os.O_CREAT, mode & 0o7777, ctypes.byref(handle))
        return self._keep(handle)

    def read(self, path, size, offset, fh):
        buf = ctypes.create_string_buffer(size)
        got = 0
        while got < size:
            n = self.nfs.call("nfs_pread", self.handles[fh], offset + got, size - got, ctypes.byref(buf, got))
            if n == 0:  # end of file
                break
            got += n
        return buf.raw[:got]

    def write(self, path, data, offset, fh):
        buf = ctypes.create_string_buffer(data, len(data))
        done = 0
        while done < len(data):
            n = self.nfs.call("nfs_pwrite", self.handles[fh], offset + done, len(data) - done, ctypes.byref(buf, done))
            if n == 0:
                raise mfusepy.FuseOSError(errno.EIO)
            done += n
        return done

    def fsync(self, path, datasync, fh):
        return self.nfs.call("nfs_fsync", self.handles[fh])

    def flush(self, path, fh):
        return 0  # writes go to the server as they come (no client-side cache to flush)

    def release(self, path, fh):
        handle = self.handles.pop(fh, None)
        if handle is not None:
            self.nfs.lib.nfs_close(self.nfs.ctx, handle)
        return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("server")
    parser.add_argument("export")
    parser.add_argument("mountpoint")
    parser.add_argument("--ready", help="file written once the mount is up")
    args = parser.parse_args(argv)
    try:
        # libnfs says only "nfs_service failed" when the server is unreachable: ask the socket first, as
        # mount.nfs does with rpcbind (port 111), for "No route to host" or "Connection refused".
        socket.create_connection((args.server.strip("[]"), 111), timeout=15).close()
        client = NfsClient(args.server, args.export)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(f"{reason} ({args.server}:{args.export})", file=sys.stderr)
        return 32  # mount(8)'s "mount failure"
    mfusepy.FUSE(
        NfsFS(client, args.ready), args.mountpoint, foreground=True, nothreads=True,
        fsname=f"{args.server}:{args.export}", subtype="nfsfuse", allow_other=True, default_permissions=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
