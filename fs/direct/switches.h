// The environment switches of the library and its debug log.
//
//  WALFS_DIRECT=0        the library is inert: no lease is ever asked for, so every call
//                        passes straight through.
//  WALFS_DIRECT_READS=0  no read leases: descriptors opened read-only are not tracked and
//                        their reads go through FUSE (writes are as before).
//  WALFS_DIRECT_DEBUG=1  decisions (lease granted or refused, identity mismatch, mapping
//                        failure) are logged to stderr, each line prefixed "walfs-direct:".
// Read once, on first use. Silent by default.
#ifndef WALFS_FS_DIRECT_SWITCHES_H_
#define WALFS_FS_DIRECT_SWITCHES_H_

namespace walfs::direct {

bool DirectEnabled();
bool DirectReadsEnabled();
bool DebugEnabled();

// Formats into a stack buffer and writes one line to fd 2 with a single write(2), so
// lines of concurrent processes do not interleave; errno is preserved. No-op unless
// DebugEnabled().
void DebugLog(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_SWITCHES_H_
