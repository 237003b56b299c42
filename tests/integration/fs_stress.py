#!/usr/bin/env python3
"""Concurrent load on a walfs mount, for race detection (fs_stress_test.sh).

    fs_stress.py MOUNTPOINT SECONDS [PROCESSES]

PROCESSES workers (default 6), each with two threads, run for SECONDS: create, write,
pwrite, read back, fsync, fdatasync, O_DSYNC writes, truncate, fallocate, rename
(plain, over an existing name, RENAME_EXCHANGE), link, unlink, mkdir/rmdir, readdir,
stat and segment-named files (which get a whole segment extent at create) — in a
directory of their own and in one directory all of them share.

Files in a thread's own directory are touched by that thread only, so their contents
are checked exactly. In the shared directory names come and go under the other
workers, so only the errnos such races can give are accepted (ENOENT, EEXIST,
ENOTEMPTY, ENOSPC, ...); anything else, or a wrong byte, is a failure. Exit 1 on
any failure, with what failed.
"""

import ctypes
import errno
import multiprocessing
import os
import random
import sys
import threading
import time

LIBC = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
# Errnos a shared-directory operation can meet because another worker got there first.
# (EPERM: a hard link to a name another worker made a directory.)
RACE_ERRNOS = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR,
               errno.EPERM, errno.ENOSPC}


def exchange(a, b):
    if LIBC.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def pattern(tag, n):
    """n bytes that depend on tag, so a mix-up between files is seen."""
    seed = (tag * 2654435761) & 0xFFFFFFFF
    block = bytes((seed >> (8 * (i % 4)) ^ i) & 0xFF for i in range(251))
    return (block * (n // 251 + 1))[:n]


class Worker:
    def __init__(self, mnt, wid, deadline):
        self.mnt = mnt
        self.wid = wid
        self.own = os.path.join(mnt, f"own-{wid}")
        self.shared = os.path.join(mnt, "shared")
        self.deadline = deadline
        self.rng = random.Random(wid)
        self.files = {}  # own name -> (tag, size)
        self.next_tag = wid * 1_000_000
        self.ops = 0
        self.errors = []
        self.hot_fd = None

    def fail(self, what):
        self.errors.append(f"worker {self.wid}: {what}")

    def own_path(self, name):
        return os.path.join(self.own, name)

    # --- own directory: exact contents ------------------------------------------------

    def own_create(self):
        self.next_tag += 1
        tag, size = self.next_tag, self.rng.choice([0, 1, 100, 4096, 8192, 65536, 300_000])
        name = f"f{tag}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        if self.rng.random() < 0.3:
            flags |= os.O_DSYNC
        fd = os.open(self.own_path(name), flags, 0o644)
        try:
            data = pattern(tag, size)
            pos = 0
            while pos < size:  # in pieces, as PostgreSQL writes WAL pages
                n = min(size - pos, self.rng.choice([512, 8192, 131072]))
                os.pwrite(fd, data[pos:pos + n], pos)
                pos += n
            if self.rng.random() < 0.5:
                os.fdatasync(fd) if self.rng.random() < 0.5 else os.fsync(fd)
        finally:
            os.close(fd)
        self.files[name] = (tag, size)

    def own_verify(self):
        if not self.files:
            return
        name = self.rng.choice(list(self.files))
        tag, size = self.files[name]
        with open(self.own_path(name), "rb") as f:
            got = f.read()
        if got != pattern(tag, size):
            self.fail(f"{name}: {len(got)} bytes read, {size} written, contents differ")

    def own_truncate(self):
        if not self.files:
            return
        name = self.rng.choice(list(self.files))
        tag, size = self.files[name]
        new = self.rng.randrange(0, size + 1) if size else 0
        os.truncate(self.own_path(name), new)
        # A grown tail reads as zeros, so only shrinking keeps the pattern checkable.
        self.files[name] = (tag, new)

    def own_rename(self):
        if len(self.files) < 2:
            return
        a, b = self.rng.sample(list(self.files), 2)
        if self.rng.random() < 0.5:
            os.rename(self.own_path(a), self.own_path(b))  # over an existing file
            self.files[b] = self.files.pop(a)
        else:
            exchange(self.own_path(a), self.own_path(b))
            self.files[a], self.files[b] = self.files[b], self.files[a]

    def own_unlink(self):
        if not self.files:
            return
        name = self.rng.choice(list(self.files))
        if self.rng.random() < 0.5:
            # Unlinked while open: still readable through the descriptor.
            tag, size = self.files[name]
            fd = os.open(self.own_path(name), os.O_RDONLY)
            try:
                os.unlink(self.own_path(name))
                got = os.pread(fd, size + 1, 0)
                if got != pattern(tag, size):
                    self.fail(f"{name}: contents differ after unlink while open")
            finally:
                os.close(fd)
        else:
            os.unlink(self.own_path(name))
        del self.files[name]

    def own_list(self):
        listed = set(os.listdir(self.own))
        if listed != set(self.files):
            self.fail(f"own directory lists {sorted(listed ^ set(self.files))[:5]} wrongly")

    # --- shared directory: races --------------------------------------------------------

    def shared_name(self):
        return os.path.join(self.shared, f"s{self.rng.randrange(40)}")

    def shared_op(self):
        op = self.rng.randrange(10)
        p, q = self.shared_name(), self.shared_name()
        if op == 0:
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, os.urandom(self.rng.choice([1, 4096, 20000])),
                          self.rng.randrange(0, 65536))
                os.fsync(fd)
                os.pread(fd, 65536, 0)
            finally:
                os.close(fd)
        elif op == 1:
            os.rename(p, q)
        elif op == 2:
            os.unlink(p)
        elif op == 3:
            os.link(p, q)
        elif op == 4:
            os.mkdir(p)
        elif op == 5:
            os.rmdir(p)
        elif op == 6:
            for entry in os.scandir(self.shared):
                entry.stat(follow_symlinks=False)
        elif op == 7:
            os.stat(p)
        elif op == 8:
            exchange(p, q)
        else:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(fd, 0, self.rng.choice([4096, 100_000]))
            finally:
                os.close(fd)

    def segment_op(self):
        # A WAL segment: created with its whole extent, zero-filled, renamed into place,
        # then removed (PostgreSQL's recycling on a small scale).
        tmp = os.path.join(self.shared, f"xlogtemp.{self.wid}")
        seg = os.path.join(self.shared, "%024X" % (self.wid * 1000 + self.rng.randrange(3)))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.pwrite(fd, bytes(65536), 0)
            os.pwrite(fd, pattern(self.wid, 8192), 8192)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, seg)
        with open(seg, "rb") as f:
            if f.read(16384)[8192:] != pattern(self.wid, 8192):
                self.fail(f"{seg}: page written before the rename differs")
        if self.rng.random() < 0.5:
            os.unlink(seg)

    def hot_op(self):
        # Every thread on one file at once: sizes change under concurrent reads, writes,
        # truncates and stats, the densest overlap of requests on one inode.
        if self.hot_fd is None:
            self.hot_fd = os.open(os.path.join(self.shared, "hot"), os.O_RDWR | os.O_CREAT,
                                  0o644)
        r = self.rng.random()
        if r < 0.4:
            os.pwrite(self.hot_fd, b"h" * self.rng.choice([1, 100, 5000]),
                      self.rng.randrange(0, 1 << 18))
        elif r < 0.7:
            os.pread(self.hot_fd, 8192, self.rng.randrange(0, 1 << 18))
        elif r < 0.8:
            os.ftruncate(self.hot_fd, self.rng.randrange(0, 1 << 17))
        elif r < 0.9:
            os.fstat(self.hot_fd)
        else:
            os.fdatasync(self.hot_fd)

    def step(self):
        if len(self.files) >= 40:  # bounded: the pool must not fill up
            self.own_unlink()
            return
        r = self.rng.random()
        if r < 0.25:
            self.own_create()
        elif r < 0.40:
            self.own_verify()
        elif r < 0.45:
            self.own_truncate()
        elif r < 0.52:
            self.own_rename()
        elif r < 0.60:
            self.own_unlink() if len(self.files) > 5 else self.own_create()
        elif r < 0.62:
            self.own_list()
        elif r < 0.66:
            self.segment_op()
        elif r < 0.80:
            self.shared_op()
        else:
            self.hot_op()

    def run(self):
        os.makedirs(self.own, exist_ok=True)
        while time.monotonic() < self.deadline and len(self.errors) < 5:
            try:
                self.step()
            except OSError as e:
                if e.errno not in RACE_ERRNOS or e.filename is None or \
                        not os.fsdecode(e.filename).startswith(self.shared):
                    self.fail(f"{e}")
            self.ops += 1
        if self.hot_fd is not None:
            os.close(self.hot_fd)
        for name in list(self.files):
            self.own_verify()
        self.own_list()


def process_main(mnt, index, deadline, queue):
    errors, ops = [], 0
    workers = [Worker(mnt, index * 2 + t, deadline) for t in range(2)]
    threads = [threading.Thread(target=w.run) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in workers:
        errors += w.errors
        ops += w.ops
    queue.put((ops, errors))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(f"usage: {sys.argv[0]} MOUNTPOINT SECONDS [PROCESSES]")
    mnt, seconds = sys.argv[1], float(sys.argv[2])
    procs = int(sys.argv[3]) if len(sys.argv) == 4 else 6
    os.makedirs(os.path.join(mnt, "shared"), exist_ok=True)
    deadline = time.monotonic() + seconds
    queue = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=process_main, args=(mnt, i, deadline, queue))
          for i in range(procs)]
    for p in ps:
        p.start()
    total, errors = 0, []
    for _ in ps:
        ops, errs = queue.get()
        total += ops
        errors += errs
    for p in ps:
        p.join()
        if p.exitcode != 0:
            errors.append(f"a worker process exited with {p.exitcode}")
    print(f"fs_stress: {total} operations by {procs * 2} threads in {seconds:.0f}s")
    for e in errors:
        print(f"  {e}")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
