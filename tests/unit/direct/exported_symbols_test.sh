#!/bin/sh
# libwalfs-direct.so exports exactly the interposed libc functions: everything else is
# hidden, so nothing of ours can clash with or be bound to by the host program.
set -eu
lib=$1
expected="__open64_2 __open_2 __openat64_2 __openat_2 accept accept4 close close_range
closefrom creat creat64 dup dup2 dup3 eventfd fcntl fcntl64 fdatasync fdopen fsync
memfd_create open open64 openat openat64 pipe pipe2 openat2 pwrite pwrite64 pwritev pwritev2
pwritev64 pwritev64v2 socket socketpair syscall write __pread_chk __pread64_chk pread pread64
preadv preadv64 preadv2 preadv64v2 lseek lseek64 writev read readv __read_chk copy_file_range"
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort | tr '\n' ' ')
want=$(echo $expected | tr ' ' '\n' | sort | tr '\n' ' ')
if [ "$actual" != "$want" ]; then
  echo "exported symbols differ:"
  echo "  expected: $want"
  echo "  actual:   $actual"
  exit 1
fi
echo "exports: $actual"
