# shellcheck shell=bash
# lib.sh: what engine.sh and podman.sh share; sourced, never run.

is_root() { [ "$(id -u)" -eq 0 ]; }
is_debian() { [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; }

# pidfile_live FILE: FILE names a live process.
pidfile_live() {
	local pid
	[ -r "$1" ] || return 1
	pid=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# apt_install [--no-install-recommends] PACKAGE...: apt-get install (say and die are the caller's), updating the package lists first only
# when apt does not know a package, or when the install fails on stale lists.
# One at a time: `make test` runs its gates side by side, and on a fresh
# machine several install at once, where apt-get would fail on dpkg's lock
# instead of waiting for it.
apt_install() {
	local lock
	exec {lock}>/run/lock/rightsize-apt.lock
	flock "$lock"
	apt_install_locked "$@"
	local rc=$?
	exec {lock}>&-
	return $rc
}

apt_install_locked() {
	export DEBIAN_FRONTEND=noninteractive
	local pkg updated="" opts=()
	if [ "${1:-}" = --no-install-recommends ]; then
		opts=("$1")
		shift
	fi
	for pkg in "$@"; do
		if ! apt-cache show --no-all-versions "$pkg" >/dev/null 2>&1; then
			say "apt-get update"
			apt-get update -qq >&2
			updated=1
			break
		fi
	done
	say "apt-get install -y ${opts[*]} $*"
	if ! apt-get install -y -qq "${opts[@]}" "$@" >&2; then
		[ -z "$updated" ] || die "apt-get install $* failed"
		say "apt-get update, then install again"
		apt-get update -qq >&2
		apt-get install -y -qq "${opts[@]}" "$@" >&2 || die "apt-get install $* failed"
	fi
}

# start_detached LOG CMD...: start CMD in the background, in a session of
# its own where setsid exists, with stdin from /dev/null and its output
# appended to LOG. Whatever else is open here (a lock, a CI runner's or
# make's pipes) is closed first: a daemon must not hold it for as long as
# it lives. Sets DETACHED_PID. Environment for CMD is exported by the
# caller beforehand.
# shellcheck disable=SC2034 # read by the scripts that source this
DETACHED_PID=
start_detached() {
	local log=$1 setsid=
	shift
	mkdir -p "$(dirname "$log")"
	command -v setsid >/dev/null 2>&1 && setsid=setsid
	(
		for fd in /proc/self/fd/*; do
			fd=${fd##*/}
			if [ "$fd" -gt 2 ]; then
				{ exec {fd}>&-; } 2>/dev/null || true
			fi
		done
		# shellcheck disable=SC2086 # $setsid is empty or one word
		exec nohup $setsid "$@" </dev/null >>"$log" 2>&1
	) &
	# shellcheck disable=SC2034 # read by the scripts that source this
	DETACHED_PID=$!
}
