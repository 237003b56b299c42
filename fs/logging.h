// Daemon logging: one sink for walfs's own messages and libfuse's.
//
// In the foreground, lines go to stderr as "walfs: ...". When stderr is the journal
// (systemd's JOURNAL_STREAM names it), each line starts with its sd-daemon priority
// ("<3>walfs: ..."), which journald turns into the line's priority; on a terminal or in
// a file there is no prefix. Once detached, lines go to syslog(3) (LOG_DAEMON), since
// stderr then points at /dev/null.
//
// Thread safety: Log may be called from any thread at any time. UseSyslog is called once,
// by the detached daemon before it starts serving requests.
#ifndef WALFS_FS_LOGGING_H_
#define WALFS_FS_LOGGING_H_

#include <syslog.h>

namespace walfs::fs {

// Priorities are syslog's (LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG).
void Log(int priority, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Messages above LOG_INFO (i.e. LOG_DEBUG) are dropped unless enabled (-d).
void SetDebugLogging(bool enabled);

// Switches the sink from stderr to syslog(3).
void UseSyslog();

// Routes libfuse's own messages (fuse_log) through Log.
void RouteFuseLogging();

}  // namespace walfs::fs

#endif  // WALFS_FS_LOGGING_H_
