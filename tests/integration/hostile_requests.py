#!/usr/bin/env python3
"""Hostile requests against a mounted walfs, one group at a time (fs_hostile_test.sh).

    hostile_requests.py GROUP MOUNTPOINT

Each check makes one system call whose outcome is fixed: it must succeed, or fail with
exactly the errno named. Every failed check is printed; the exit status is 1 if any
failed, 0 otherwise. Groups leave nothing behind but what `persist` keeps for the next
mount (checked by `persisted`).
"""

import ctypes
import errno
import os
import stat
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
SYS_GETDENTS64 = 217  # x86_64
TIB = 1 << 40

failures = []


def check(what, fn, want=None):
    """Runs fn(); want=None: must succeed (returns fn's result); else an errno."""
    try:
        result = fn()
    except OSError as e:
        if want is None:
            failures.append(f"{what}: failed with {errno.errorcode.get(e.errno, e.errno)}")
        elif e.errno != want:
            failures.append(f"{what}: {errno.errorcode.get(e.errno, e.errno)}, "
                            f"want {errno.errorcode[want]}")
        return None
    if want is not None:
        failures.append(f"{what}: succeeded, want {errno.errorcode[want]}")
    return result


def expect(what, cond):
    if not cond:
        failures.append(what)


def renameat2(old, new, flags):
    if LIBC.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def getdents(fd, size=4096):
    buf = ctypes.create_string_buffer(size)
    n = LIBC.syscall(SYS_GETDENTS64, fd, buf, size)
    if n < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    names, pos = [], 0
    while pos < n:
        reclen = int.from_bytes(buf.raw[pos + 16:pos + 18], "little")
        names.append(buf.raw[pos + 19:pos + reclen].split(b"\0", 1)[0])
        pos += reclen
    return names


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def size_of(path):
    return os.stat(path).st_size


def free_blocks(mnt):
    return os.statvfs(mnt).f_bfree


def names(m):
    t = os.path.join(m, "names")
    os.mkdir(t)
    fs = os.statvfs(m)
    expect(f"f_namemax {fs.f_namemax}, want 255", fs.f_namemax == 255)
    n255 = "n" * 255
    for n in (256, 300, 1024, 1025, 4000):
        long = os.path.join(t, "x" * n)
        check(f"create {n}-byte name", lambda: os.open(long, os.O_CREAT | os.O_WRONLY, 0o644),
              errno.ENAMETOOLONG)
        check(f"mkdir {n}-byte name", lambda: os.mkdir(long), errno.ENAMETOOLONG)
        check(f"stat {n}-byte name", lambda: os.stat(long), errno.ENAMETOOLONG)
        check(f"symlink named {n} bytes", lambda: os.symlink("t", long), errno.ENAMETOOLONG)
        check(f"unlink {n}-byte name", lambda: os.unlink(long), errno.ENAMETOOLONG)
        check(f"rmdir {n}-byte name", lambda: os.rmdir(long), errno.ENAMETOOLONG)
    write_file(os.path.join(t, "f"), b"f")
    long = os.path.join(t, "y" * 256)
    check("link to a 256-byte name", lambda: os.link(os.path.join(t, "f"), long),
          errno.ENAMETOOLONG)
    check("rename to a 256-byte name", lambda: os.rename(os.path.join(t, "f"), long),
          errno.ENAMETOOLONG)
    check("mknod of a 256-byte name", lambda: os.mknod(long, 0o644 | stat.S_IFREG),
          errno.ENAMETOOLONG)
    # The longest name walfs stores is NAME_MAX: no name <= 255 bytes is cut short.
    p = os.path.join(t, n255)
    write_file(p, b"255")
    expect("255-byte name not listed whole", n255 in os.listdir(t))
    with open(p, "rb") as f:
        expect("255-byte name content", f.read() == b"255")
    q = os.path.join(t, "m" * 255)
    check("rename between 255-byte names", lambda: os.rename(p, q))
    expect("255-byte rename result", sorted(os.listdir(t)) == ["f", "m" * 255])
    check("mkdir 255-byte name", lambda: os.mkdir(os.path.join(t, "d" * 255)))
    # Any byte but '/' and NUL is a name byte: non-UTF-8, control characters, newlines.
    odd = [b"\xff\xfe\x80", b"line\nbreak", b"\x01\x02\x7f", b" ", b"-", b"...", "é" * 127]
    for raw in odd:
        name = raw if isinstance(raw, bytes) else raw.encode()
        path = os.path.join(os.fsencode(t), name)
        check(f"create odd name {name!r}", lambda: write_file(path, name))
    listed = set(os.listdir(os.fsencode(t)))
    for raw in odd:
        name = raw if isinstance(raw, bytes) else raw.encode()
        expect(f"odd name {name!r} not listed back", name in listed)
    check("create a 256-byte name of 2-byte UTF-8 characters",
          lambda: write_file(os.path.join(t, "é" * 128), b""), errno.ENAMETOOLONG)


def persisted_names(m):
    t = os.path.join(m, "names")
    expect("255-byte names after remount",
           {"m" * 255, "d" * 255} <= set(os.listdir(t)))
    with open(os.path.join(t, "m" * 255), "rb") as f:
        expect("255-byte name content after remount", f.read() == b"255")
    expect("non-UTF-8 name after remount", b"\xff\xfe\x80" in os.listdir(os.fsencode(t)))


def paths(m):
    t = os.path.join(m, "paths")
    os.mkdir(t)
    f = os.path.join(t, "file")
    d = os.path.join(t, "dir")
    write_file(f, b"data")
    os.mkdir(d)
    write_file(os.path.join(d, "inner"), b"x")
    for what, fn in [
        ("open file/x", lambda: os.open(f + "/x", os.O_RDONLY)),
        ("create file/x", lambda: os.open(f + "/x", os.O_CREAT | os.O_WRONLY, 0o644)),
        ("mkdir file/x", lambda: os.mkdir(f + "/x")),
        ("stat file/", lambda: os.stat(f + "/")),
        ("stat file/.", lambda: os.stat(f + "/.")),
        ("stat file/..", lambda: os.stat(f + "/..")),
        ("rename into file/x", lambda: os.rename(os.path.join(d, "inner"), f + "/x")),
        ("rename dir over a file", lambda: os.rename(d, f)),
        ("rmdir a file", lambda: os.rmdir(f)),
        ("O_DIRECTORY on a file", lambda: os.open(f, os.O_RDONLY | os.O_DIRECTORY)),
        ("symlink at file/x", lambda: os.symlink("t", f + "/x")),
        ("link to file/x", lambda: os.link(f, f + "/x")),
    ]:
        check(what, fn, errno.ENOTDIR)
    check("unlink a directory", lambda: os.unlink(d), errno.EISDIR)
    check("rename file over a dir", lambda: os.rename(f, d), errno.EISDIR)
    check("rmdir non-empty", lambda: os.rmdir(d), errno.ENOTEMPTY)
    check("rmdir .", lambda: os.rmdir(d + "/."), errno.EINVAL)
    check("rmdir the mount root", lambda: os.rmdir(m), errno.EBUSY)
    check("open missing/x", lambda: os.open(t + "/missing/x", os.O_RDONLY), errno.ENOENT)
    check("readlink of a file", lambda: os.readlink(f), errno.EINVAL)
    # A symlink loop resolves to ELOOP, never a hang in the daemon.
    os.symlink("loop-b", os.path.join(t, "loop-a"))
    os.symlink("loop-a", os.path.join(t, "loop-b"))
    check("open through a symlink loop", lambda: os.open(os.path.join(t, "loop-a"), os.O_RDONLY),
          errno.ELOOP)
    check("O_NOFOLLOW on a symlink",
          lambda: os.open(os.path.join(t, "loop-a"), os.O_RDONLY | os.O_NOFOLLOW), errno.ELOOP)


def renames(m):
    t = os.path.join(m, "renames")
    a = os.path.join(t, "a")
    os.makedirs(os.path.join(a, "b", "c"))
    os.mkdir(os.path.join(t, "empty"))
    os.mkdir(os.path.join(t, "full"))
    write_file(os.path.join(t, "full", "keep"), b"keep")
    write_file(os.path.join(t, "f"), b"f")
    check("dir into its own child", lambda: os.rename(a, os.path.join(a, "x")), errno.EINVAL)
    check("dir into its grandchild", lambda: os.rename(a, os.path.join(a, "b", "c", "x")),
          errno.EINVAL)
    check("dir over its own descendant", lambda: os.rename(a, os.path.join(a, "b", "c")),
          errno.EINVAL)
    check("exchange a dir with its descendant",
          lambda: renameat2(a, os.path.join(a, "b"), RENAME_EXCHANGE), errno.EINVAL)
    check("child dir over its non-empty ancestor", lambda: os.rename(os.path.join(a, "b"), a),
          errno.ENOTEMPTY)
    check("dir over a non-empty dir", lambda: os.rename(a, os.path.join(t, "full")),
          errno.ENOTEMPTY)
    check("NOREPLACE with EXCHANGE",
          lambda: renameat2(os.path.join(t, "f"), os.path.join(t, "empty"),
                            RENAME_NOREPLACE | RENAME_EXCHANGE), errno.EINVAL)
    check("unknown rename flag",
          lambda: renameat2(os.path.join(t, "f"), os.path.join(t, "g"), 1 << 7), errno.EINVAL)
    check("RENAME_WHITEOUT",
          lambda: renameat2(os.path.join(t, "f"), os.path.join(t, "g"), RENAME_WHITEOUT),
          errno.EINVAL)
    check("rename the mount root", lambda: os.rename(m, m + "-moved"), errno.EBUSY)
    check("rename .", lambda: os.rename(a + "/.", os.path.join(t, "dot")), errno.EBUSY)
    check("rename a missing name", lambda: os.rename(os.path.join(t, "none"), a), errno.ENOENT)
    expect("a/b/c lost by a refused rename", os.path.isdir(os.path.join(a, "b", "c")))
    expect("full/keep lost", open(os.path.join(t, "full", "keep"), "rb").read() == b"keep")
    nlink = os.stat(t).st_nlink
    check("dir over an empty dir", lambda: os.rename(a, os.path.join(t, "empty")))
    expect(f"parent nlink {os.stat(t).st_nlink} after replacing a dir, want {nlink - 1}",
           os.stat(t).st_nlink == nlink - 1)
    expect("moved tree", os.path.isdir(os.path.join(t, "empty", "b", "c")))
    check("file onto itself through a hard link", lambda: (
        os.link(os.path.join(t, "f"), os.path.join(t, "f2")),
        os.rename(os.path.join(t, "f"), os.path.join(t, "f2"))))
    expect("rename of a name onto its own hard link removed both",
           os.path.exists(os.path.join(t, "f")) and os.path.exists(os.path.join(t, "f2")))


def sizes(m):
    t = os.path.join(m, "sizes")
    os.mkdir(t)
    p = os.path.join(t, "file")
    write_file(p, b"0123456789")
    fd = os.open(p, os.O_RDWR)
    pool_bytes = os.statvfs(m).f_blocks * os.statvfs(m).f_frsize
    free0 = free_blocks(m)
    try:
        for off in (TIB, 1 << 62, (1 << 63) - 8192, pool_bytes, pool_bytes - 10):
            check(f"pwrite at {off}", lambda: os.pwrite(fd, b"x" * 4096, off), errno.EFBIG)
            expect(f"size changed by pwrite at {off}", size_of(p) == 10)
        # The kernel refuses a range past 2^63 - 1 itself.
        check("pwrite ending past 2^63", lambda: os.pwrite(fd, b"x" * 8192, (1 << 63) - 4096),
              errno.EINVAL)
        check("pwrite at a negative offset", lambda: os.pwrite(fd, b"x", -1), errno.EINVAL)
        for size in (TIB, 1 << 62, (1 << 63) - 1, pool_bytes + 1):
            check(f"ftruncate to {size}", lambda: os.ftruncate(fd, size), errno.EFBIG)
            check(f"truncate to {size}", lambda: os.truncate(p, size), errno.EFBIG)
            expect(f"size changed by truncate to {size}", size_of(p) == 10)
        check("ftruncate to -1", lambda: os.ftruncate(fd, -1), errno.EINVAL)
        # Within the pool's size but beyond its free space: ENOSPC, nothing allocated.
        more = (free0 + 64) * 4096
        if more < pool_bytes:
            check("truncate beyond free space", lambda: os.ftruncate(fd, more), errno.ENOSPC)
            expect("size changed by an ENOSPC truncate", size_of(p) == 10)
        expect(f"free blocks {free_blocks(m)} != {free0} after refused growth",
               free_blocks(m) == free0)
        expect("pread beyond EOF", os.pread(fd, 100, TIB) == b"")
        expect("pread at 2^62", os.pread(fd, 100, 1 << 62) == b"")
        expect("content after hostile sizes", os.pread(fd, 100, 0) == b"0123456789")
        # A write far beyond EOF inside the pool: the gap reads as zeros, the file grows.
        gap = min(8 << 20, pool_bytes // 4)
        check("pwrite past EOF in the pool", lambda: os.pwrite(fd, b"tail", gap))
        expect("size after a gap write", size_of(p) == gap + 4)
        expect("gap is zeros", os.pread(fd, 1 << 20, 4096) == bytes(1 << 20))
        check("truncate back", lambda: os.ftruncate(fd, 10))
        expect("content after truncate back", os.pread(fd, 100, 0) == b"0123456789")
        # fallocate
        for off, length in ((0, pool_bytes + 4096), (TIB, 4096), (1 << 62, 1 << 62),
                            ((1 << 63) - 8192, 4096)):
            check(f"fallocate {off}+{length}",
                  lambda: os.posix_fallocate(fd, off, length), errno.EFBIG)
            expect(f"size changed by fallocate {off}+{length}", size_of(p) == 10)
        if more < pool_bytes:
            check("fallocate beyond free space", lambda: os.posix_fallocate(fd, 0, more),
                  errno.ENOSPC)
        check("fallocate of 0 bytes", lambda: os.posix_fallocate(fd, 0, 0), errno.EINVAL)
        check("fallocate at -1", lambda: os.posix_fallocate(fd, -1, 10), errno.EINVAL)
        expect("size changed by fallocate", size_of(p) == 10)
        # Times beyond what an inode stores (int64 ns: 1677..2262) are clamped, as the
        # kernel does for file systems with a narrower range.
        check("utime year 2^40 s", lambda: os.utime(p, ns=(0, (1 << 40) * 10**9)))
        st = os.stat(p)
        expect(f"mtime {st.st_mtime_ns} after a far-future utime, want >= 2262",
               st.st_mtime_ns >= (1 << 63) - 10**9 - 1 - 10**10)
        check("utime before 1677", lambda: os.utime(p, ns=(-(1 << 40) * 10**9, 0)))
        st = os.stat(p)
        expect(f"atime {st.st_atime_ns} after a far-past utime, want <= 1678",
               st.st_atime_ns <= -(1 << 63) + 10**10 + 10**9)
        check("utime negative ns", lambda: os.utime(p, ns=(-1, -1_500_000_001)))
        st = os.stat(p)
        expect(f"pre-1970 times {st.st_atime_ns} {st.st_mtime_ns}",
               st.st_atime_ns == -1 and st.st_mtime_ns == -1_500_000_001)
    finally:
        os.close(fd)
    expect(f"free blocks {free_blocks(m)} != {free0} at the end", free_blocks(m) == free0)


def flags(m):
    t = os.path.join(m, "flags")
    os.mkdir(t)
    f = os.path.join(t, "file")
    write_file(f, b"content")
    check("O_CREAT|O_EXCL on an existing file",
          lambda: os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644), errno.EEXIST)
    check("O_CREAT|O_EXCL on an existing dir",
          lambda: os.open(t, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644), errno.EEXIST)
    check("O_WRONLY on a directory", lambda: os.open(t, os.O_WRONLY), errno.EISDIR)
    check("O_RDWR on a directory", lambda: os.open(t, os.O_RDWR), errno.EISDIR)
    check("O_CREAT on a directory", lambda: os.open(t, os.O_CREAT | os.O_RDONLY, 0o644),
          errno.EISDIR)
    check("O_TRUNC on a directory", lambda: os.open(t, os.O_RDONLY | os.O_TRUNC), errno.EISDIR)
    check("O_DIRECTORY|O_CREAT", lambda: os.open(os.path.join(t, "new"),
                                                 os.O_DIRECTORY | os.O_CREAT | os.O_RDONLY,
                                                 0o644), errno.EINVAL)
    check("O_TMPFILE", lambda: os.open(t, os.O_TMPFILE | os.O_RDWR, 0o600), errno.EOPNOTSUPP)
    fd = os.open(f, os.O_RDONLY)
    try:
        check("write to an O_RDONLY fd", lambda: os.write(fd, b"x"), errno.EBADF)
    finally:
        os.close(fd)
    fd = os.open(t, os.O_RDONLY | os.O_DIRECTORY)
    try:
        check("read from a directory fd", lambda: os.read(fd, 10), errno.EISDIR)
        # Directory offsets are cookies; garbage ones end the listing, nothing more.
        for cookie in (3, 12345, 1 << 40, (1 << 63) - 1):
            os.lseek(fd, cookie, os.SEEK_SET)
            check(f"getdents at cookie {cookie}", lambda: getdents(fd))
        os.lseek(fd, 0, os.SEEK_SET)
        expect("getdents from 0", b"file" in (check("getdents from 0", lambda: getdents(fd)) or []))
    finally:
        os.close(fd)
    expect("file changed by refused opens", open(f, "rb").read() == b"content")


def nodes(m):
    t = os.path.join(m, "nodes")
    os.mkdir(t)
    # Inert inodes (the mount is nodev): created with their type and device number.
    for what, mode in (("fifo", stat.S_IFIFO), ("char device", stat.S_IFCHR),
                       ("block device", stat.S_IFBLK), ("socket", stat.S_IFSOCK)):
        p = os.path.join(t, what)
        check(f"mknod {what}", lambda: os.mknod(p, mode | 0o644, os.makedev(1, 3)))
        st = os.lstat(p)
        expect(f"mknod {what} type", stat.S_IFMT(st.st_mode) == mode)
        if mode in (stat.S_IFCHR, stat.S_IFBLK):
            expect(f"mknod {what} rdev", st.st_rdev == os.makedev(1, 3))
    check("open a device node on a nodev mount",
          lambda: os.close(os.open(os.path.join(t, "char device"), os.O_RDONLY)), errno.EACCES)
    check("truncate a fifo", lambda: os.truncate(os.path.join(t, "fifo"), 0), errno.EINVAL)
    check("mknod regular file", lambda: os.mknod(os.path.join(t, "reg"), stat.S_IFREG | 0o600))
    expect("mknod regular type", stat.S_ISREG(os.stat(os.path.join(t, "reg")).st_mode))
    d = os.path.join(t, "d")
    os.mkdir(d)
    check("hard link to a directory", lambda: os.link(d, os.path.join(t, "dlink")), errno.EPERM)
    check("hard link over an existing name",
          lambda: os.link(os.path.join(t, "reg"), d), errno.EEXIST)
    check("hard link to a missing file",
          lambda: os.link(os.path.join(t, "none"), os.path.join(t, "x")), errno.ENOENT)
    # Symlink targets up to 416 bytes are stored inline in the inode, longer ones up to
    # PATH_MAX - 1 in a block of their own.
    for n in (1, 255, 416, 417, 1000, 4095):
        target = ("t" * 9 + "/") * (n // 10) + "t" * (n % 10)
        check(f"symlink target of {n} bytes",
              lambda: os.symlink(target, os.path.join(t, f"s{n}")))
        expect(f"readlink of a {n}-byte target",
               os.readlink(os.path.join(t, f"s{n}")) == target)
    check("symlink target of 4096 bytes",
          lambda: os.symlink("t" * 4096, os.path.join(t, "s4096")), errno.ENAMETOOLONG)
    check("empty symlink target", lambda: os.symlink("", os.path.join(t, "empty")),
          errno.ENOENT)
    check("hard link to a symlink", lambda: os.link(os.path.join(t, "s1"),
                                                     os.path.join(t, "s1-link"),
                                                     follow_symlinks=False))
    check("bind a unix socket in the mount", lambda: bind_socket(os.path.join(t, "sock")))
    expect("bound socket type", stat.S_ISSOCK(os.lstat(os.path.join(t, "sock")).st_mode))
    # Inode exhaustion: ENOSPC at create, and everything works again once names go.
    made = []
    try:
        for i in range(1 << 20):
            p = os.path.join(t, f"fill-{i}")
            fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
            os.close(fd)
            made.append(p)
    except OSError as e:
        expect(f"inode exhaustion: {errno.errorcode[e.errno]}, want ENOSPC",
               e.errno == errno.ENOSPC)
    check("mkdir with no free inode", lambda: os.mkdir(os.path.join(t, "nodir")), errno.ENOSPC)
    check("symlink with no free inode", lambda: os.symlink("x", os.path.join(t, "nosym")),
          errno.ENOSPC)
    # Hard links need only directory entries, which run out next.
    links = []
    try:
        for i in range(1 << 20):
            p = os.path.join(t, f"link-{i}")
            os.link(made[0], p)
            links.append(p)
    except OSError as e:
        expect(f"dirent exhaustion: {errno.errorcode[e.errno]}, want ENOSPC",
               e.errno == errno.ENOSPC)
    expect(f"link count {os.stat(made[0]).st_nlink}, want {len(links) + 1}",
           os.stat(made[0]).st_nlink == len(links) + 1)
    for p in made + links:
        os.unlink(p)
    check("create after exhaustion", lambda: write_file(os.path.join(t, "after"), b"ok"))


def bind_socket(path):
    import socket
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(path)
    finally:
        s.close()


def xattrs(m):
    t = os.path.join(m, "xattrs")
    os.mkdir(t)
    f = os.path.join(t, "file")
    write_file(f, b"content")
    check("setxattr user.x", lambda: os.setxattr(f, "user.x", b"v"), errno.EOPNOTSUPP)
    check("setxattr 64 KiB + 1 value", lambda: os.setxattr(f, "user.x", bytes(65537)),
          errno.E2BIG)
    check("setxattr 64 KiB value", lambda: os.setxattr(f, "user.x", bytes(65536)),
          errno.EOPNOTSUPP)
    check("setxattr 1 MiB value", lambda: os.setxattr(f, "user.x", bytes(1 << 20)), errno.E2BIG)
    check("setxattr 256-byte name", lambda: os.setxattr(f, "user." + "n" * 251, b"v"),
          errno.ERANGE)
    check("setxattr trusted.x", lambda: os.setxattr(f, "trusted.x", b"v"), errno.EOPNOTSUPP)
    # A malformed capability is the kernel's to refuse (cap_convert_nscap).
    check("setxattr malformed security.capability",
          lambda: os.setxattr(f, "security.capability", bytes(20)), errno.EINVAL)
    check("getxattr user.x", lambda: os.getxattr(f, "user.x"), errno.ENODATA)
    check("removexattr user.x", lambda: os.removexattr(f, "user.x"), errno.ENODATA)
    expect("listxattr of a file", os.listxattr(f) == [])
    # The status document is read-only and only on the root.
    status = check("getxattr status", lambda: os.getxattr(m, "user.walfs.status"))
    expect("status document", status is not None and status.startswith(b"{"))
    for value in (b"", b"{}", bytes(65536)):
        check(f"setxattr status ({len(value)} bytes)",
              lambda: os.setxattr(m, "user.walfs.status", value), errno.EOPNOTSUPP)
    check("setxattr status XATTR_CREATE",
          lambda: os.setxattr(m, "user.walfs.status", b"x", os.XATTR_CREATE), errno.EOPNOTSUPP)
    check("removexattr status", lambda: os.removexattr(m, "user.walfs.status"), errno.ENODATA)
    check("getxattr status on a file", lambda: os.getxattr(f, "user.walfs.status"),
          errno.ENODATA)
    expect("status after abuse", os.getxattr(m, "user.walfs.status").startswith(b"{"))
    expect("listxattr of the root", os.listxattr(m) == [])
    buf = ctypes.create_string_buffer(8)
    r = LIBC.getxattr(os.fsencode(m), b"user.walfs.status", buf, 8)
    expect(f"getxattr status into 8 bytes: {r} {ctypes.get_errno()}, want ERANGE",
           r == -1 and ctypes.get_errno() == errno.ERANGE)
    expect("file content after xattr abuse", open(f, "rb").read() == b"content")


GROUPS = {"names": names, "persisted_names": persisted_names, "paths": paths,
          "renames": renames, "sizes": sizes, "flags": flags, "nodes": nodes,
          "xattrs": xattrs}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in GROUPS:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(GROUPS)}}} MOUNTPOINT")
    GROUPS[sys.argv[1]](sys.argv[2])
    for f in failures:
        print(f"  {sys.argv[1]}: {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
