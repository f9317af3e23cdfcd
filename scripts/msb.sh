#!/usr/bin/env bash
# msb.sh: the real microsandbox command line, msb, for the msb backend's
# tests (the msb gate of `make test`), installed the way a user installs it:
# `npm install microsandbox@VERSION`, from the npm registry, into a cache
# folder of its own. Nothing of it is kept in the repository.
#
#   msb.sh install     make sure msb VERSION is in the cache (install it
#                      when it is not; nothing to do when it is) and print
#                      the path of the msb binary (the only line on stdout)
#   msb.sh path        print that path when it is installed, install nothing
#                      (exit 1 when it is not)
#   msb.sh shim        print the path of the umbrella package's `msb`
#                      command (a node script that runs the binary above,
#                      found through its platform package, or MSB_PATH)
#   msb.sh version     print the version this project pins
#   msb.sh available   exit 0 when install can work here; otherwise say why
#                      not and exit 1
#   msb.sh boot [MSB]  try to boot one microVM (a busybox root file system,
#                      64 MB) with a state folder of its own, then remove
#                      it; exit 0 when it booted, else say why not, with
#                      msb's own words, and exit 1
#   msb.sh gate GO GOTESTFLAGS PKG...
#                      the msb gate of `make test`: install, say which msb
#                      and whether a microVM boots, run the packages' tests
#                      against it (RIGHTSIZE_TEST_MSB), and say how many
#                      passed and which skipped, with why; where msb cannot
#                      be had, say why and pass (RIGHTSIZE_SKIP_MSB=1
#                      skips it)
#
# The umbrella package `microsandbox` holds a node shim (bin `msb`) and
# names one platform package per system as an optional dependency; npm
# installs the one of this machine, which holds the binary, libkrunfw and a
# node addon: on Linux x86_64,
# @superradcompany/microsandbox-linux-x64-gnu/{bin/msb,lib/libkrunfw.so.*}.
# msb finds libkrunfw beside itself (`msb doctor` says where): no
# LD_LIBRARY_PATH is needed, so MSB_PATH alone names a working msb.
#
# The install goes into a temporary folder beside its place and is moved
# there once `msb --version` says VERSION: a stopped install leaves no
# half one to be taken for a whole one. Two installs at once: the second
# waits on a lock, then finds the first's.
#
# Environment (all optional):
#   RIGHTSIZE_MSB_CACHE   the cache ($HOME/.cache/rightsize-msb); the
#                         install is $CACHE/<version>/
set -euo pipefail

say() { printf 'msb: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# shellcheck source=scripts/lib.sh
. "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/lib.sh"

# VERSION is the one place the pinned release is named; docs/backends.md
# says what is verified against it.
VERSION=0.6.18
CACHE=${RIGHTSIZE_MSB_CACHE:-${HOME:-/root}/.cache/rightsize-msb}
DEST=$CACHE/$VERSION

# platform: the platform package's suffix for this machine, or nothing
# where microsandbox publishes none (its umbrella package lists darwin-arm64,
# linux-{x64,arm64}-gnu and win32-{x64,arm64}-msvc).
platform() {
	case "$(uname -s)/$(uname -m)" in
	Linux/x86_64) echo linux-x64-gnu ;;
	Linux/aarch64 | Linux/arm64) echo linux-arm64-gnu ;;
	Darwin/arm64) echo darwin-arm64 ;;
	esac
}

PLATFORM=$(platform)
BIN=$DEST/node_modules/@superradcompany/microsandbox-$PLATFORM/bin/msb
SHIM=$DEST/node_modules/.bin/msb

installed() { [ -n "$PLATFORM" ] && [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null)" = "msb $VERSION" ]; }

# missing: what install lacks here, empty when nothing.
missing() {
	if [ -z "$PLATFORM" ]; then
		echo "a microsandbox release for $(uname -s) $(uname -m)"
	elif [ "$PLATFORM" != darwin-arm64 ] && ! ldd --version 2>&1 | grep -qi -e glibc -e 'gnu libc'; then
		echo "glibc (microsandbox's Linux packages are built for it)"
	elif ! installed && ! command -v npm >/dev/null 2>&1 && ! { is_root && is_debian; }; then
		echo "npm, to install microsandbox@$VERSION from the npm registry (as root on Debian or Ubuntu this script installs it)"
	fi
}

install() {
	installed && {
		echo "$BIN"
		return 0
	}
	local m
	m=$(missing)
	[ -z "$m" ] || die "cannot install msb here: no $m"
	command -v npm >/dev/null 2>&1 || apt_install npm
	mkdir -p "$CACHE"
	exec 8>>"$CACHE/.lock"
	flock -w 600 8 || die "another msb.sh install holds $CACHE/.lock for over 10 minutes"
	installed && {
		echo "$BIN"
		return 0
	}
	local tmp start=$SECONDS
	tmp=$(mktemp -d "$CACHE/.install.XXXXXX")
	say "npm install microsandbox@$VERSION into $DEST (from $(npm config get registry 2>/dev/null || echo 'the npm registry'))"
	# The platform package is named too: npm silently skips an optional
	# dependency whose "engines" this node does not meet (it asks for node
	# 22 or later), and the shim then finds no binary. Named, a
	# mismatch is only a warning. --ignore-scripts: the packages have no
	# install scripts, and nothing is run on the way in.
	if ! (cd "$tmp" && npm install --prefix "$tmp" --no-save --no-package-lock --no-audit --no-fund --ignore-scripts --omit=dev --loglevel=error \
		"microsandbox@$VERSION" "@superradcompany/microsandbox-$PLATFORM@$VERSION" >&2); then
		rm -rf "$tmp"
		die "npm install microsandbox@$VERSION failed (npm's message is above)"
	fi
	local got
	got=$("$tmp/node_modules/@superradcompany/microsandbox-$PLATFORM/bin/msb" --version 2>&1) || got="it does not run: $got"
	if [ "$got" != "msb $VERSION" ]; then
		rm -rf "$tmp"
		die "the installed msb says '$got', not 'msb $VERSION'"
	fi
	chmod 755 "$tmp"
	rm -rf "$DEST"
	mv "$tmp" "$DEST"
	say "installed msb $VERSION in $((SECONDS - start)) s: $BIN"
	echo "$BIN"
}

# metrics_segment HOME: the shared-memory file msb 0.6.18 makes for HOME
# on its first sandbox and never removes: msb-met-<FNV-1a 64 of HOME's
# bytes>-v3.
metrics_segment() {
	local LC_ALL=C s=$1 h=-3750763034362895579 i c # 0xcbf29ce484222325
	for ((i = 0; i < ${#s}; i++)); do
		printf -v c '%d' "'${s:i:1}"
		h=$(((h ^ (c & 255)) * 1099511628211))
	done
	printf '/dev/shm/msb-met-%016x-v3' "$h"
}

# boot MSB: one microVM, in a state folder of its own removed after.
boot() {
	local msb=${1:-$BIN} home rc=0 out
	[ -x "$msb" ] || die "no msb at $msb (msb.sh install)"
	[ -x /bin/busybox ] || die "no /bin/busybox to make a root file system of (apt-get install busybox-static)"
	home=$(mktemp -d /tmp/rz-msb-boot.XXXXXX)
	mkdir -p "$home/rootfs/bin" "$home/tmp"
	cp /bin/busybox "$home/rootfs/bin/busybox"
	out=$(MSB_HOME=$home/home TMPDIR=$home/tmp timeout 120 "$msb" run --name rz-boot-check -m 64M "$home/rootfs" -- /bin/busybox true 2>&1) || rc=$?
	if [ "$rc" -ne 0 ]; then
		say "no microVM boots here: msb run says: $(printf '%s' "$out" | head -n 2 | tr '\n' ' ')"
		MSB_HOME=$home/home "$msb" logs --source system rz-boot-check 2>/dev/null | grep -E 'ERROR|error' | head -n 3 | sed 's/^/msb:   guest: /' >&2 || true
		"$msb" doctor 2>&1 | grep -E '^ *(✗|error:|→)' | head -n 3 | sed 's/^ */msb:   doctor: /' >&2 || true
		# This host's KVM may be kvm-pvm (no vmx: a paravirtual KVM),
		# which says where the guest stopped.
		{
			dmesg 2>/dev/null | grep -E 'kvm-pvm: loaded' | tail -n 1
			dmesg 2>/dev/null | grep -E 'kvm-pvm: INTERNAL_ERROR' | tail -n 1
		} | sed 's/^\[ *[0-9.]*\] /msb:   host kernel: /' >&2 || true
		say "(docs/backends.md says why, and what is tested instead)"
	fi
	MSB_HOME=$home/home "$msb" stop -f rz-boot-check >/dev/null 2>&1 || true
	MSB_HOME=$home/home "$msb" rm rz-boot-check >/dev/null 2>&1 || true
	rm -rf "$home"
	rm -f "$(metrics_segment "$home/home")"
	return "$rc"
}

# gate GO GOTESTFLAGS PKG...: see the top.
gate() {
	local go=$1 flags=$2 m msb log rc=0 boots=0
	shift 2
	if [ -n "${RIGHTSIZE_SKIP_MSB:-}" ]; then
		echo "msb gate: skipped (RIGHTSIZE_SKIP_MSB is set)"
		return 0
	fi
	m=$(missing)
	if [ -n "$m" ]; then
		echo "msb gate: skipped: msb cannot be installed here: no $m"
		return 0
	fi
	msb=$(install) || {
		echo "msb gate: skipped: msb $VERSION could not be installed (the reason is above)"
		return 0
	}
	echo "msb gate: against $("$msb" --version), npm microsandbox@$VERSION ($msb)"
	if (boot "$msb"); then
		boots=1
		echo "msb gate: a microVM boots here"
	else
		echo "msb gate: no microVM boots here (why: above, and docs/backends.md); everything up to the boot runs against the real msb, what needs a booted sandbox against the stand-in (internal/backend/msb/testdata/msb-standin)"
	fi
	log=$(mktemp)
	echo "RIGHTSIZE_TEST_MSB=$msb RIGHTSIZE_TEST_MSB_BOOTS=$boots $go test $flags -v $*"
	# shellcheck disable=SC2086 # the flags are words
	RIGHTSIZE_TEST_MSB=$msb RIGHTSIZE_TEST_MSB_BOOTS=$boots "$go" test $flags -v "$@" >"$log" 2>&1 || rc=$?
	# Each skip with its reason (the test's last log line: with -v, Go
	# prints a test's lines under `=== NAME` and its verdict after them),
	# the helper entry point aside; failures; each package's result; how
	# many passed.
	awk '
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
		/^ +[^ ]+\.go:[0-9]+: / { line = $0; sub(/^ +[^ ]+\.go:[0-9]+: /, "", line); last[cur] = line; next }
		/^ *--- SKIP: / {
			if ($3 != "TestMsbHelper") printf "msb gate: skipped %s: %s\n", $3, last[$3]
			next
		}
		/^ *--- PASS: / { pass++ }
		/^ *--- FAIL: / { print }
		/^(ok|FAIL)[ \t]/ { print }
		END { printf "msb gate: %d tests passed\n", pass }
	' "$log"
	[ "$rc" -eq 0 ] || cat "$log"
	rm -f "$log"
	return "$rc"
}

case ${1:-install} in
install) install ;;
path)
	installed || exit 1
	echo "$BIN"
	;;
shim)
	installed || die "msb $VERSION is not installed (msb.sh install)"
	echo "$SHIM"
	;;
version) echo "$VERSION" ;;
available)
	m=$(missing)
	[ -z "$m" ] || {
		say "msb cannot be installed here: no $m"
		exit 1
	}
	;;
boot)
	shift
	boot "$@"
	;;
gate)
	shift
	gate "$@"
	;;
*) die "usage: msb.sh install|path|shim|version|available|boot [MSB]|gate GO GOTESTFLAGS PKG..." ;;
esac
