// sd_notify over a unix datagram socket.
#include "fs/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace walfs::fs {

absl::Status SdNotify(std::string_view state) {
  const char* env = getenv("NOTIFY_SOCKET");
  if (env == nullptr || env[0] == '\0') return absl::OkStatus();
  std::string name(env);
  if (name[0] != '/' && name[0] != '@') {
    return absl::InvalidArgumentError(
        absl::StrCat("NOTIFY_SOCKET=", name, ": neither a path nor an @abstract name"));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.size() > sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("NOTIFY_SOCKET=", name, ": too long"));
  }
  std::memcpy(addr.sun_path, name.data(), name.size());
  socklen_t length = offsetof(sockaddr_un, sun_path) + name.size();
  if (name[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace: the length delimits the name
  } else if (name.size() < sizeof(addr.sun_path)) {
    ++length;  // include the terminating NUL of a path
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return core::PosixError("sd_notify: socket", errno);
  ssize_t sent;
  do {
    sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                  reinterpret_cast<const sockaddr*>(&addr), length);
  } while (sent < 0 && errno == EINTR);
  int error = errno;
  close(fd);
  if (sent < 0) return core::PosixError(absl::StrCat("sd_notify to ", name), error);
  return absl::OkStatus();
}

}  // namespace walfs::fs
