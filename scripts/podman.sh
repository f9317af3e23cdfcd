#!/usr/bin/env bash
# podman.sh: bring up Podman's Docker-compatible API service on a socket of
# its own, for running the engine tests against Podman (`make test-podman`),
# and take it down again.
#
#   podman.sh [start]          make sure the service answers; print the
#                              DOCKER_HOST that reaches it (the only line on
#                              stdout)
#   podman.sh stop             stop the service this script started
#   podman.sh host             print the DOCKER_HOST, start nothing
#   podman.sh conf             print the containers.conf the service runs
#                              with, start nothing (a second service a test
#                              starts takes it too)
#   podman.sh available        exit 0 on Linux when podman is installed or
#                              this script can install it (root on Debian);
#                              otherwise say why not and exit 1
#   podman.sh rootless-ready   exit 0 when `rootless` can run here;
#                              otherwise say what is missing and exit 1
#   podman.sh rootless -- CMD  as root: run CMD as a throw-away unprivileged
#                              user against that user's own rootless service,
#                              then remove the user and everything it made
#
# start is idempotent: when the socket answers /_ping it only prints the
# DOCKER_HOST. Otherwise it installs podman (as root on Debian or Ubuntu;
# elsewhere it says what is missing), writes a containers.conf and starts
# `podman system service --time=0` detached, in its own session, with its
# log in $LOG, and waits until the socket answers.
#
# The containers.conf lowers Podman's default ulimits for containers to
# what this host's hard limits allow. Podman 4.3 asks for nofile and nproc
# above them by default, and then every container fails to start with
# "error setting rlimit type 7: operation not permitted" (7 is nofile, 6
# nproc). The values are the lower of the wanted ones and the hard limits
# of the shell that starts the service.
#
# As root, the service and its files live under /run/rightsize-podman; as
# another user (rootless Podman), under $XDG_RUNTIME_DIR/rightsize-podman.
# Podman keeps its images and containers in its own store, apart from
# Docker's: what runs there is not seen by `docker` on the default socket.
#
# Environment (all optional):
#   RIGHTSIZE_PODMAN_DIR       the socket, pid file and containers.conf
#   RIGHTSIZE_PODMAN_LOG       the service's log  (/var/log/rightsize-podman.log
#                              as root, $DIR/podman.log otherwise)
#   RIGHTSIZE_PODMAN_TIMEOUT   seconds to wait for the service  (60)
#   RIGHTSIZE_PODMAN_USER      the user `rootless` creates  (rz-podman)
set -euo pipefail

say() { printf 'podman: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# shellcheck source=scripts/lib.sh
. "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/lib.sh"

if is_root; then
	DIR=${RIGHTSIZE_PODMAN_DIR:-/run/rightsize-podman}
	LOG=${RIGHTSIZE_PODMAN_LOG:-/var/log/rightsize-podman.log}
else
	DIR=${RIGHTSIZE_PODMAN_DIR:-${XDG_RUNTIME_DIR:-/tmp/rightsize-podman-$(id -u)}/rightsize-podman}
	LOG=${RIGHTSIZE_PODMAN_LOG:-$DIR/podman.log}
fi
SOCK=$DIR/podman.sock
PIDFILE=$DIR/podman.pid
CONF=$DIR/containers.conf
TIMEOUT=${RIGHTSIZE_PODMAN_TIMEOUT:-60}
HOST=unix://$SOCK

# answers: the service answers GET /_ping with OK.
answers() {
	[ -S "$SOCK" ] || return 1
	if command -v curl >/dev/null 2>&1; then
		[ "$(curl -s -m 5 --unix-socket "$SOCK" http://podman/_ping 2>/dev/null)" = OK ]
	else
		podman --url "$HOST" version >/dev/null 2>&1
	fi
}

# running: the pid file names a live podman process.
running() { pidfile_live "$PIDFILE"; }

# available: podman is here or can be installed here, on Linux (Podman's
# API service runs on Linux only; elsewhere it runs in a VM).
available() {
	[ "$(uname -s)" = Linux ] || return 1
	command -v podman >/dev/null 2>&1 || { is_root && is_debian; }
}

ensure_podman() {
	command -v podman >/dev/null 2>&1 && return 0
	available || die "podman is not installed: install it with your system's tools (as root on Debian or Ubuntu this script runs apt-get install podman)"
	apt_install podman
}

# limit WANT HARD: the lower of the two ("unlimited" is no bound).
limit() {
	if [ "$2" = unlimited ] || [ "$1" -le "$2" ]; then
		echo "$1"
	else
		echo "$2"
	fi
}

write_conf() {
	local nofile nproc
	nofile=$(limit 1048576 "$(ulimit -Hn)")
	nproc=$(limit 32768 "$(ulimit -Hu)")
	cat >"$CONF.tmp" <<EOF
# Written by rightsize-go's scripts/podman.sh: the default ulimits of
# containers, at most this host's hard limits, so that containers start.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
EOF
	mv "$CONF.tmp" "$CONF"
}

start_service() {
	rm -f "$SOCK"
	say "starting podman system service --time=0 $HOST (log: $LOG)"
	CONTAINERS_CONF=$CONF start_detached "$LOG" podman system service --time=0 "$HOST"
	echo "$DETACHED_PID" >"$PIDFILE"
}

wait_service() {
	local pid deadline=$((SECONDS + TIMEOUT))
	pid=$(cat "$PIDFILE")
	until answers; do
		if ! kill -0 "$pid" 2>/dev/null; then
			say "the service exited; the end of $LOG:"
			tail -n 20 "$LOG" >&2 || true
			exit 1
		fi
		[ "$SECONDS" -lt "$deadline" ] || die "no answer on $SOCK after ${TIMEOUT}s; see $LOG"
		sleep 0.2
	done
}

start() {
	if answers; then
		echo "$HOST"
		return 0
	fi
	ensure_podman
	mkdir -p "$DIR"
	chmod 700 "$DIR"
	if running; then
		say "podman (pid $(cat "$PIDFILE")) runs but does not answer yet; waiting"
	else
		write_conf
		start_service
	fi
	wait_service
	say "the service answers at $HOST ($(podman --version 2>/dev/null || echo '?'))"
	echo "$HOST"
}

stop() {
	if ! running; then
		rm -f "$PIDFILE"
		return 0
	fi
	local pid i=0
	pid=$(cat "$PIDFILE")
	# What is still there is not this script's to remove, but say so: a
	# test run should have left nothing.
	local left
	left=$(podman --url "$HOST" ps -a -q --filter label=dev.rightsize.runId 2>/dev/null | wc -l) || left=0
	[ "$left" -eq 0 ] || say "$left rightsize container(s) are still on Podman (podman ps -a --filter label=dev.rightsize.runId)"
	kill "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "the service (pid $pid) did not end on SIGTERM within 10 s; SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$PIDFILE" "$SOCK"
	say "stopped the service at $HOST"
}

# rootless -- CMD...: run CMD as a new unprivileged user, with DOCKER_HOST
# set to that user's rootless Podman service, then remove the user. The
# test images of root's Podman are copied into the user's store first: the
# user cannot build them (the go tool's caches and the module are root's).
ROOTLESS_USER=${RIGHTSIZE_PODMAN_USER:-rz-podman}

# rootless_missing: what rootless Podman lacks here, empty when nothing
# (podman itself is installed by ensure_podman, with these two packages).
rootless_missing() {
	if ! is_root; then
		echo "root (rootless creates and removes the user $ROOTLESS_USER)"
	elif ! command -v podman >/dev/null 2>&1; then
		: # ensure_podman installs it, with uidmap and slirp4netns
	elif ! command -v newuidmap >/dev/null 2>&1; then
		echo "newuidmap (apt-get install uidmap)"
	elif ! command -v slirp4netns >/dev/null 2>&1; then
		echo "slirp4netns (apt-get install slirp4netns)"
	elif [ ! -c /dev/net/tun ]; then
		echo "/dev/net/tun, which slirp4netns, the rootless network, opens"
	elif ! runuser -u nobody -- unshare --user true 2>/dev/null; then
		echo "user namespaces for unprivileged users (unshare --user fails as nobody)"
	fi
}

rootless() {
	[ "${1:-}" = -- ] && shift
	[ $# -gt 0 ] || die "rootless: no command"
	local missing
	missing=$(rootless_missing)
	[ -z "$missing" ] || die "rootless: missing: $missing"
	ensure_podman
	missing=$(rootless_missing)
	[ -z "$missing" ] || die "rootless: missing: $missing"
	local user=$ROOTLESS_USER uid home run rc=0
	if id "$user" >/dev/null 2>&1; then
		say "rootless: the user $user is left from an earlier run: removing it first"
		remove_user "$user"
	fi
	useradd --create-home --shell /bin/sh "$user"
	trap 'remove_user "'"$user"'"' EXIT
	uid=$(id -u "$user")
	home=$(getent passwd "$user" | cut -d: -f6)
	# useradd gives the user subordinate ids where login.defs says so;
	# Podman needs a range for the image's files.
	grep -q "^$user:" /etc/subuid 2>/dev/null || usermod --add-subuids 200000-265535 "$user"
	grep -q "^$user:" /etc/subgid 2>/dev/null || usermod --add-subgids 200000-265535 "$user"
	# slirp4netns, the rootless network, opens /dev/net/tun.
	if [ -e /dev/net/tun ] && ! runuser -u "$user" -- test -r /dev/net/tun -a -w /dev/net/tun; then
		if command -v setfacl >/dev/null 2>&1; then
			setfacl -m "u:$user:rw" /dev/net/tun
		else
			TUN_MODE=$(stat -c %a /dev/net/tun)
			say "rootless: /dev/net/tun is $TUN_MODE; opening it to everyone while $user exists"
			chmod 666 /dev/net/tun
		fi
	fi
	run=/run/user/$uid
	mkdir -p "$run"
	chown "$user:" "$run"
	chmod 700 "$run"

	local as=(runuser -u "$user" -- env -i HOME="$home" USER="$user" LOGNAME="$user" PATH="$PATH" XDG_RUNTIME_DIR="$run")
	local host
	host=$("${as[@]}" bash "$(realpath "$0")" start)
	local img
	# Tagged images only: an untagged one that inherited the label (a
	# test's build FROM a test image) has no name to load it under.
	for img in $(podman images --format '{{.Repository}}:{{.Tag}}' --filter label=dev.rightsize.test-image=1 | grep -v '<none>' | sed 's,^localhost/,,'); do
		podman save "$img" | "${as[@]}" podman load -q >&2
	done
	say "rootless: running $* as $user (uid $uid) with DOCKER_HOST=$host"
	"${as[@]}" DOCKER_HOST="$host" TESTCONTAINERS_RYUK_DISABLED=true "$@" || rc=$?
	"${as[@]}" bash "$(realpath "$0")" stop || true
	return "$rc"
}

TUN_MODE=
remove_user() {
	local user=$1 uid
	uid=$(id -u "$user" 2>/dev/null) || return 0
	# The user's containers and store go with it; its processes first
	# (conmon and the containers outlive the service).
	runuser -u "$user" -- env -i HOME="$(getent passwd "$user" | cut -d: -f6)" PATH="$PATH" XDG_RUNTIME_DIR="/run/user/$uid" \
		podman system reset --force >/dev/null 2>&1 || true
	local pids
	pids=$(ps -o pid= -u "$uid" 2>/dev/null) || pids=
	# shellcheck disable=SC2086 # one pid a word
	[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	sleep 0.2
	if command -v setfacl >/dev/null 2>&1; then
		setfacl -x "u:$user" /dev/net/tun 2>/dev/null || true
	fi
	[ -z "$TUN_MODE" ] || chmod "$TUN_MODE" /dev/net/tun
	userdel --remove "$user" 2>/dev/null || true
	rm -rf "/run/user/$uid"
	say "rootless: removed the user $user"
}

case ${1:-start} in
start) start ;;
stop) stop ;;
host) echo "$HOST" ;;
conf) echo "$CONF" ;;
rootless-ready)
	missing=$(rootless_missing)
	[ -z "$missing" ] || {
		say "rootless Podman cannot run here: missing $missing"
		exit 1
	}
	;;
available)
	available || {
		say "podman is not installed, and only root on Debian or Ubuntu installs it here (or this is not Linux)"
		exit 1
	}
	;;
rootless)
	shift
	rootless "$@"
	;;
*) die "usage: podman.sh [start|stop|host|available|rootless-ready|rootless -- CMD...]" ;;
esac
