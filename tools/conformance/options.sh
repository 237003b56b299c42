# shellcheck shell=bash
# Shared by the conformance scripts' command lines (sourced before they parse their
# arguments, so it only defines functions and runs nothing): the usage texts, --mode and
# where the logs go. Never mounts or writes outside the log directory.

# usage: the script's leading comment, from its second line to `set -euo`.
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# usage_error MESSAGE...: "SCRIPT: MESSAGE" and the pointer to --help on stderr; exit 1.
usage_error() {
  echo "${0##*/}: $*" >&2
  echo "Try '${0##*/} --help' for more information." >&2
  exit 1
}

# conformance_modes VALUE: sets MODES from --mode's VALUE (pmem, msync or both).
conformance_modes() {
  case $1 in
    pmem | msync) MODES=("$1") ;;
    both) MODES=(pmem msync) ;;
    *) usage_error "--mode takes pmem, msync or both" ;;
  esac
}

# conformance_log_dir ENV PREFIX: sets LOG_DIR, made and absolute, and exports it as ENV.
# ENV already set means this run is the one re-executed in a mount namespace: it keeps
# the first run's directory. Otherwise --log-dir's LOG_DIR, or a new /var/tmp/PREFIX.XXXXXX.
conformance_log_dir() {
  local env=$1 prefix=$2
  if [ -n "${!env:-}" ]; then
    LOG_DIR=${!env}
  elif [ -z "$LOG_DIR" ]; then
    LOG_DIR=$(mktemp -d "/var/tmp/$prefix.XXXXXX")
  fi
  mkdir -p "$LOG_DIR"
  LOG_DIR=$(readlink -f "$LOG_DIR")
  export "$env=$LOG_DIR"
}
