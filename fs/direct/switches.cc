// Environment switches and the debug log.
#include "fs/direct/switches.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace walfs::direct {
namespace {

struct Switches {
  bool enabled;
  bool reads;
  bool debug;
};

const Switches& Get() {
  static const Switches switches = [] {
    const char* enabled = getenv("WALFS_DIRECT");
    const char* reads = getenv("WALFS_DIRECT_READS");
    const char* debug = getenv("WALFS_DIRECT_DEBUG");
    return Switches{
        .enabled = enabled == nullptr || strcmp(enabled, "0") != 0,
        .reads = reads == nullptr || strcmp(reads, "0") != 0,
        .debug = debug != nullptr && strcmp(debug, "1") == 0,
    };
  }();
  return switches;
}

}  // namespace

bool DirectEnabled() { return Get().enabled; }
bool DirectReadsEnabled() { return Get().reads; }
bool DebugEnabled() { return Get().debug; }

void DebugLog(const char* format, ...) {
  if (!DebugEnabled()) return;
  const int saved_errno = errno;
  char line[512];
  int n = snprintf(line, sizeof(line), "walfs-direct: [%d] ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, format);
  // One byte stays free for the newline; vsnprintf keeps one more for its NUL.
  const int room = static_cast<int>(sizeof(line)) - n - 1;
  const int m = vsnprintf(line + n, room, format, ap);
  va_end(ap);
  if (m > 0) n += m < room ? m : room - 1;
  line[n++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, n);
  (void)ignored;
  errno = saved_errno;
}

}  // namespace walfs::direct
