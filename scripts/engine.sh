#!/usr/bin/env bash
# engine.sh: make sure a Docker engine answers, and that the tests and the
# demo have a static busybox to build their images of (`make engine`).
#
# When `docker info` answers and /bin/busybox is static, it does nothing
# else. When no engine answers, as root on Debian or Ubuntu, it installs
# docker.io and busybox-static with apt-get and starts dockerd in the
# background, detached (its log goes to $LOG), then waits until the engine
# answers; anywhere else it says what is missing and exits 1.
#
# A static busybox is installed (busybox-static) only as root on Debian or
# Ubuntu. Elsewhere (a laptop: not root, or macOS) its absence is not an
# error: the tests and the demo then copy /bin/busybox out of the official
# busybox:1.37.0-musl image the first time they need it, and keep the copy
# (internal/image, FindBusybox; the tag must match its BusyboxImage).
#
# Safe to run twice at once: the second waits on a lock.
#
# Environment (all optional):
#   DOCKER_HOST                 the engine to ask; dockerd is started only on
#                               the default socket, or on another unix://
#                               one when RIGHTSIZE_DOCKERD_PIDFILE is set
#   RIGHTSIZE_DOCKERD_LOG       dockerd's log  (/var/log/rightsize-dockerd.log)
#   RIGHTSIZE_DOCKERD_PIDFILE   dockerd's pid file  (/var/run/docker.pid)
#   RIGHTSIZE_DOCKERD_FLAGS     more dockerd flags, split on spaces
#                               (e.g. --data-root DIR --exec-root DIR)
#   RIGHTSIZE_ENGINE_TIMEOUT    seconds to wait for a started engine  (60)
#   RIGHTSIZE_ENGINE_LOCK       the lock file  (/tmp/rightsize-engine.lock)
#   RIGHTSIZE_BUSYBOX           a static busybox to use instead of /bin/busybox
set -euo pipefail

LOG=${RIGHTSIZE_DOCKERD_LOG:-/var/log/rightsize-dockerd.log}
PIDFILE=${RIGHTSIZE_DOCKERD_PIDFILE:-/var/run/docker.pid}
TIMEOUT=${RIGHTSIZE_ENGINE_TIMEOUT:-60}
LOCK=${RIGHTSIZE_ENGINE_LOCK:-/tmp/rightsize-engine.lock}
BUSYBOX=${RIGHTSIZE_BUSYBOX:-/bin/busybox}

say() { printf 'engine: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# engine_answers: `docker info` succeeds within a few seconds. Its error is
# kept in ENGINE_ERR for the message.
ENGINE_ERR=
engine_answers() {
	if ! command -v docker >/dev/null 2>&1; then
		ENGINE_ERR="no docker command on the PATH"
		return 1
	fi
	local out t=
	# macOS has no timeout(1); its bash (3.2) cannot expand an empty array
	# under set -u, hence a word.
	command -v timeout >/dev/null 2>&1 && t="timeout 5"
	# shellcheck disable=SC2086 # $t is empty or two words
	if out=$($t docker info 2>&1); then
		return 0
	fi
	# A newer client says why on stderr; an older one on stdout, as an
	# "ERROR:" line among the client's own information.
	ENGINE_ERR=$(printf '%s\n' "$out" | grep -m 1 -E 'ERROR|[Cc]annot connect|denied|refused' | sed 's/^[[:space:]]*ERROR:[[:space:]]*//') || true
	[ -n "$ENGINE_ERR" ] || ENGINE_ERR=$(printf '%s\n' "${out:-no answer within 5s}" | grep -v '^[[:space:]]*$' | tail -n 1)
	return 1
}

# busybox_ok: a static busybox is where the test images take it from. A
# dynamic one (Debian's "busybox" package) cannot run in an image FROM scratch.
busybox_ok() {
	[ -x "$BUSYBOX" ] || return 1
	if command -v ldd >/dev/null 2>&1 && ldd "$BUSYBOX" >/dev/null 2>&1; then
		return 1
	fi
	return 0
}

# shellcheck source=scripts/lib.sh
. "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/lib.sh"
can_install() { is_root && is_debian; }

# no_engine: say that no engine answers, how to get one, and exit 1.
no_engine() {
	local how
	if ! is_debian; then
		how="This script installs packages only on Debian or Ubuntu: install Docker with your system's tools"
	elif command -v sudo >/dev/null 2>&1; then
		how="Installing it (apt-get install docker.io busybox-static) needs root: run \`sudo make engine\`"
	else
		how="Installing it (apt-get install docker.io busybox-static) needs root: run \`make engine\` as root"
	fi
	die "no Docker engine answers (\`docker info\`: $ENGINE_ERR). Start one (Docker Desktop, \`systemctl start docker\`, …) or point DOCKER_HOST at one. $how."
}

# ensure_busybox: a static busybox where the tests look first. One named by
# RIGHTSIZE_BUSYBOX must be right: the tests take no other then. Without
# one, root on Debian installs busybox-static; anyone else is told where the
# tests will take it from instead, and that is not a failure.
ensure_busybox() {
	busybox_ok && return 0
	[ "$BUSYBOX" = /bin/busybox ] || die "RIGHTSIZE_BUSYBOX=$BUSYBOX is not a static busybox: point it at one, or unset it"
	if ! can_install; then
		say "no static busybox at /bin/busybox (busybox-static is installed from here only as root on Debian or Ubuntu): the tests and the demo will take busybox from the busybox:1.37.0-musl image when they first need it"
		return 0
	fi
	apt_install busybox-static
	busybox_ok || die "busybox-static is installed but /bin/busybox is not a static executable"
}

ensure_packages() {
	local pkgs=()
	command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 || pkgs+=(docker.io)
	busybox_ok || pkgs+=(busybox-static)
	[ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"
}

# dockerd_running: the pid file names a live process, so an engine is on its
# way up (or stuck): wait for it rather than start a second one.
dockerd_running() { pidfile_live "$PIDFILE"; }

# start_dockerd starts dockerd in its own session with no tie to the
# caller's terminal, pipes or lock, so that `make` does not wait on its
# output, a Ctrl-C in the caller does not stop it, and the next run can take
# the lock. It sets DOCKERD_PID.
DOCKERD_PID=
start_dockerd() {
	local args=(--pidfile "$PIDFILE")
	[ -z "${DOCKER_HOST:-}" ] || args+=(--host "$DOCKER_HOST")
	if [ -n "${RIGHTSIZE_DOCKERD_FLAGS:-}" ]; then
		# shellcheck disable=SC2206 # split on spaces on purpose
		args+=(${RIGHTSIZE_DOCKERD_FLAGS})
	fi
	say "starting dockerd ${args[*]} (log: $LOG)"
	start_detached "$LOG" dockerd "${args[@]}"
	DOCKERD_PID=$DETACHED_PID
}

# wait_engine PID: poll `docker info` until it answers, the deadline passes,
# or the process PID dies. Without a PID, the dockerd waited for is not one
# this script started, and its log is elsewhere.
wait_engine() {
	local pid=${1:-} deadline=$((SECONDS + TIMEOUT))
	until engine_answers; do
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			fail_start "dockerd exited"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			[ -n "$pid" ] || die "dockerd (pid $(cat "$PIDFILE" 2>/dev/null), from $PIDFILE) runs but does not answer after ${TIMEOUT}s: $ENGINE_ERR. Look at its log, stop it, or point DOCKER_HOST at the engine you mean."
			fail_start "no answer from the engine after ${TIMEOUT}s ($ENGINE_ERR)"
		fi
		sleep 0.5
	done
	say "the engine answers ($(docker version --format '{{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null || echo '?'))"
}

fail_start() {
	say "$1; the end of $LOG:"
	tail -n 30 "$LOG" >&2 2>/dev/null || true
	exit 1
}

# check_docker_host: only an engine on a local unix socket is ever started
# from here: the default one, or another when RIGHTSIZE_DOCKERD_PIDFILE (and
# RIGHTSIZE_DOCKERD_FLAGS: --data-root, --exec-root) keep the two apart.
check_docker_host() {
	case ${DOCKER_HOST:-unix:///var/run/docker.sock} in
	unix:///var/run/docker.sock | unix:///run/docker.sock) ;;
	unix://*)
		[ -n "${RIGHTSIZE_DOCKERD_PIDFILE:-}" ] ||
			die "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST ($ENGINE_ERR). To have this script start one there beside the default engine, also set RIGHTSIZE_DOCKERD_PIDFILE and RIGHTSIZE_DOCKERD_FLAGS (--data-root DIR --exec-root DIR); or unset DOCKER_HOST"
		;;
	*) die "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST ($ENGINE_ERR); start that engine, or unset DOCKER_HOST to use (or have this script start) a local one" ;;
	esac
}

# lock: hold an exclusive lock for the rest of the script, when flock(1) is
# there and the lock file can be opened (only root changes anything, and a
# non-root user cannot always open root's file).
lock() {
	command -v flock >/dev/null 2>&1 || return 0
	if { [ -e "$LOCK" ] && [ -w "$LOCK" ]; } || { [ ! -e "$LOCK" ] && [ -w "$(dirname "$LOCK")" ]; }; then
		exec 9>>"$LOCK"
		flock -w $((TIMEOUT + 300)) 9 || die "another engine.sh holds $LOCK for too long"
	fi
}

main() {
	# The common case, an engine and busybox already there, costs one
	# `docker info` and takes no lock.
	if engine_answers && busybox_ok; then
		return 0
	fi
	lock
	if engine_answers; then
		ensure_busybox
		return 0
	fi
	check_docker_host
	can_install || no_engine
	ensure_packages
	if dockerd_running; then
		say "dockerd (pid $(cat "$PIDFILE")) is running but does not answer yet; waiting"
	else
		start_dockerd
	fi
	wait_engine "$DOCKERD_PID"
	ensure_busybox
}

# Sourcing the script (for a test of one function) runs nothing.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
