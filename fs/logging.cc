// Daemon logging to stderr (sd-daemon prefixes) or syslog(3).
#include "fs/logging.h"

#include <cstdarg>
#include <cstdio>
#include <string>

#include <fuse_lowlevel.h>

namespace walfs::fs {
namespace {

// Written before any worker thread exists; read-only afterwards.
bool g_syslog = false;
bool g_debug = false;

void VLog(int priority, const char* format, va_list args) {
  if (priority >= LOG_DEBUG && !g_debug) return;
  if (g_syslog) {
    vsyslog(priority, format, args);
    return;
  }
  // One fprintf per line so lines from concurrent threads do not interleave.
  char body[2048];
  vsnprintf(body, sizeof(body), format, args);
  std::string line(body);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  fprintf(stderr, "<%d>walfs: %s\n", priority, line.c_str());
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
