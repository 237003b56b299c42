// Daemon logging to stderr (sd-daemon prefixes when it is the journal) or syslog(3).
#include "fs/logging.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fuse_lowlevel.h>

namespace walfs::fs {
namespace {

// Written before any worker thread exists; read-only afterwards.
bool g_syslog = false;
bool g_debug = false;

// systemd sets JOURNAL_STREAM=DEVICE:INODE when it connects stdout/stderr to the journal
// (systemd.exec(5)); stderr is the journal only if it is still that file.
bool StderrIsJournal() {
  const char* stream = getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st;
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

void VLog(int priority, const char* format, va_list args) {
  if (priority >= LOG_DEBUG && !g_debug) return;
  if (g_syslog) {
    vsyslog(priority, format, args);
    return;
  }
  // Decided at the first line: stderr does not change while the daemon logs to it.
  static const bool journal = StderrIsJournal();
  // One fprintf per line so lines from concurrent threads do not interleave.
  char body[2048];
  vsnprintf(body, sizeof(body), format, args);
  std::string line(body);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (journal) {
    fprintf(stderr, "<%d>walfs: %s\n", priority, line.c_str());
  } else {
    fprintf(stderr, "walfs: %s\n", line.c_str());
  }
}

void FuseLogFunction(enum fuse_log_level level, const char* format, va_list args) {
  // fuse_log_level uses the syslog numbering (FUSE_LOG_EMERG = 0 .. FUSE_LOG_DEBUG = 7).
  VLog(static_cast<int>(level), format, args);
}

}  // namespace

void Log(int priority, const char* format, ...) {
  va_list args;
  va_start(args, format);
  VLog(priority, format, args);
  va_end(args);
}

void SetDebugLogging(bool enabled) { g_debug = enabled; }

void UseSyslog() {
  openlog("walfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
  g_syslog = true;
}

void RouteFuseLogging() { fuse_set_log_func(FuseLogFunction); }

}  // namespace walfs::fs
