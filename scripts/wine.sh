#!/usr/bin/env bash
# wine.sh: Windows test binaries, run for real under Wine on Linux: the
# Windows gate of `make test` (`make windows-gate`).
#
#   wine.sh available   exit 0 when Wine and MinGW-w64 are installed or
#                       this script can install them (root on Debian or
#                       Ubuntu, x86-64 Linux); otherwise say why not, exit 1
#   wine.sh install     install wine64 and gcc-mingw-w64-x86-64-win32 when
#                       either is missing; nothing to do when both are here
#   wine.sh prefix      make the Wine prefix when missing and print its
#                       path; nothing to do but print it when it is ready
#   wine.sh version     print Wine's version
#   wine.sh gate        build the Windows test binaries and run them under
#                       Wine (below); exit 1 when a test fails
#
# The prefix is $CACHE/<wine version>/prefix, never ~/.wine. Go 1.24 and
# later load ProcessPrng from bcryptprimitives.dll at start-up, which Wine
# 8 lacks: prefix builds one from scripts/wine/bcryptprimitives.c with
# MinGW-w64 into the prefix's system32 (again whenever the source changed).
#
# gate builds, with GOOS=windows, the test binaries of the ledger
# (internal/ledger, ledger), the memory backend, the reaper, sandboxtest
# and the Docker backend, and runs each from its package's folder (tests
# read testdata/ there) with -test.timeout:
#   - with no engine: the ledger's tests, the reaper's, and sandboxtest's
#     that need none: the native watchdog and the sweep on the memory
#     backend, with the crash rows that run there (the owner killed; the
#     owner and its watchdog killed, then the next sweep; -test.timeout);
#   - against this machine's Docker engine, over TCP on loopback (Wine
#     reaches no unix socket): the Docker backend's tests and sandboxtest's
#     engine tests, the crash rows among them. dockerd listens on its unix
#     socket alone, so scripts/wine/forward.go forwards 127.0.0.1:PORT to it
#     for as long as the gate runs. The test images are built first with
#     the Linux toolchain (the Windows side has none), from the same
#     busybox. Each package holds $RIGHTSIZE_WINE_ENGINE_LOCK while it runs.
# What Wine cannot run is skipped by name with the reason, from one list,
# scripts/wine/skips; the gate prints it, and every skip the tests made
# themselves, with their reasons.
#
# Go's os.RemoveAll (and so t.TempDir's cleanup) deletes with POSIX
# semantics, which Wine 8 answers with STATUS_NOT_IMPLEMENTED where Windows
# falls back on file systems without them (FAT32). The test binaries are
# built with an overlay of one file of Go's standard library
# (internal/syscall/windows/at_windows.go) that takes the same fallback on
# that status: a stand-in for Windows' behaviour, used only here.
#
# Wine's own services (services.exe, explorer.exe, ...) keep the output of
# the program that started the prefix's wineserver: every Windows program
# here writes to a file, never to a pipe someone waits on. The gate keeps
# the server up between test binaries and stops it (wineserver -k, this
# prefix only: every Windows process the tests left with it) at the end.
# Two gates on one prefix wait for each other.
#
# Environment (all optional):
#   RIGHTSIZE_WINE_CACHE          the prefix and the DLL ($HOME/.cache/rightsize-wine)
#   RIGHTSIZE_WINE_ENGINE_LOCK    the lock each engine run holds
#                                 (/tmp/rz-engine.lock; empty: none)
#   RIGHTSIZE_WINE_TIMEOUT        -test.timeout of each test binary  (10m)
#   RIGHTSIZE_BUSYBOX             the static busybox of the test images
#                                 (/bin/busybox)
#   GO                            the go command  (go)
set -euo pipefail

say() { printf 'windows gate: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# shellcheck source=scripts/lib.sh
. "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/lib.sh"

ROOT=$(cd "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/.." && pwd)
CACHE=${RIGHTSIZE_WINE_CACHE:-${HOME:-/root}/.cache/rightsize-wine}
ENGINE_LOCK=${RIGHTSIZE_WINE_ENGINE_LOCK-/tmp/rz-engine.lock}
TIMEOUT=${RIGHTSIZE_WINE_TIMEOUT:-10m}
BUSYBOX=${RIGHTSIZE_BUSYBOX:-/bin/busybox}
GO=${GO:-go}
MINGW=x86_64-w64-mingw32-gcc
DLL_SRC=$ROOT/scripts/wine/bcryptprimitives.c
SKIPS=$ROOT/scripts/wine/skips
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" # no Mono or Gecko prompts
unset DISPLAY                                                # no window, ever

# wine64 is on the PATH, or where Debian keeps it.
find_wine() {
	local d
	for d in "" /usr/lib/wine/ /usr/lib64/wine/; do
		if [ -z "$d" ]; then
			command -v wine64 2>/dev/null && return 0
		elif [ -x "${d}wine64" ]; then
			echo "${d}wine64"
			return 0
		fi
	done
	return 1
}

find_wineserver() {
	local d
	d=$(dirname "$(find_wine)")
	for f in "$d/wineserver64" "$d/wineserver"; do
		[ -x "$f" ] && echo "$f" && return 0
	done
	command -v wineserver 2>/dev/null
}

installed() { find_wine >/dev/null && command -v "$MINGW" >/dev/null 2>&1; }

available() {
	if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then
		say "Wine runs the Windows test binaries on x86-64 Linux only (this is $(uname -s) $(uname -m))"
		return 1
	fi
	installed && return 0
	if is_root && is_debian; then
		return 0
	fi
	say "wine64 and $MINGW are not both installed, and only root on Debian or Ubuntu installs them here (apt-get install wine64 gcc-mingw-w64-x86-64-win32)"
	return 1
}

install() {
	installed && return 0
	available || exit 1
	local t0=$SECONDS
	apt_install --no-install-recommends wine64 gcc-mingw-w64-x86-64-win32
	say "installed wine64 and MinGW-w64 in $((SECONDS - t0)) s"
}

version() { "$(find_wine)" --version; }

# prefix_dir: the prefix of this Wine version, in the cache.
prefix_dir() {
	local v
	v=$(version | tr -c 'A-Za-z0-9.\n-' '_')
	echo "$CACHE/$v/prefix"
}

prefix() {
	local pfx sum
	pfx=$(prefix_dir)
	export WINEPREFIX=$pfx
	mkdir -p "$(dirname "$pfx")"
	if [ ! -f "$pfx/system.reg" ]; then
		local t0=$SECONDS
		say "making the Wine prefix $pfx"
		(
			for fd in /proc/self/fd/*; do
				fd=${fd##*/}
				[ "$fd" -gt 2 ] && { exec {fd}>&-; } 2>/dev/null || true
			done
			exec "$(find_wine)" wineboot -i </dev/null >>"$(dirname "$pfx")/wineboot.log" 2>&1
		) || die "wineboot -i failed (its log: $(dirname "$pfx")/wineboot.log)"
		"$(find_wineserver)" -w
		say "made the prefix in $((SECONDS - t0)) s"
	fi
	sum=$(sha256sum "$DLL_SRC" | cut -d' ' -f1)
	if [ "$(cat "$pfx/.rightsize-dll" 2>/dev/null)" != "$sum" ]; then
		"$MINGW" -shared -O2 -s -o "$pfx/drive_c/windows/system32/bcryptprimitives.dll" "$DLL_SRC" -ladvapi32 ||
			die "building bcryptprimitives.dll from $DLL_SRC failed"
		echo "$sum" >"$pfx/.rightsize-dll"
		say "built bcryptprimitives.dll (ProcessPrng over advapi32's SystemFunction036) into the prefix"
	fi
	echo "$pfx"
}

# overlay: the overlay file of the build (see the top), made once per Go.
overlay() {
	local goroot gov src dir
	goroot=$("$GO" env GOROOT)
	gov=$("$GO" env GOVERSION)
	src=$goroot/src/internal/syscall/windows/at_windows.go
	dir=$CACHE/go-overlay/$gov
	if [ ! -f "$dir/overlay.json" ]; then
		mkdir -p "$dir"
		awk '
			{ print }
			/STATUS_NOT_SUPPORTED: .*FILE_DISPOSITION_INFORMATION_EX/ && !done {
				print "\t\treturn deleteatFallback(h)"
				print "\tcase NTStatus(0xC0000002): // STATUS_NOT_IMPLEMENTED: Wine 8 (scripts/wine.sh)"
				done = 1
			}
			END { exit !done }
		' "$src" >"$dir/at_windows.go" ||
			die "$src has no longer the fallback the Wine overlay extends ($gov): scripts/wine.sh needs a look"
		printf '{"Replace":{"%s":"%s"}}\n' "$src" "$dir/at_windows.go" >"$dir/overlay.json"
	fi
	echo "$dir/overlay.json"
}

# skip_pattern PKG: the -test.skip pattern of PKG's entries in the list.
skip_pattern() {
	local pkg=$1 p t rest pat=
	while read -r p t rest; do
		case $p in '' | '#'*) continue ;; esac
		[ "$p" = "$pkg" ] || continue
		t=$(printf '%s' "$t" | sed 's/[][\.*^$+?(){}|]/\\&/g; s|/|$/^|g')
		pat=${pat:+$pat|}^$t\$
	done <"$SKIPS"
	echo "$pat"
}

# show_skips PKG: the list's entries for PKG, as the gate prints them.
show_skips() {
	local pkg=$1 p t rest
	while read -r p t rest; do
		case $p in '' | '#'*) continue ;; esac
		[ "$p" = "$pkg" ] && printf '    not run under Wine: %s: %s\n' "$t" "$rest"
	done <"$SKIPS"
	return 0
}

# The awk functions that read test2json's events.
# shellcheck disable=SC2016 # awk, not shell
JSON_AWK='
	function field(name,   re) {
		re = "\"" name "\":\"([^\"\\\\]|\\\\.)*\""
		if (!match($0, re)) return ""
		return substr($0, RSTART + length(name) + 4, RLENGTH - length(name) - 5)
	}
	function text(s) {
		sub(/\\n$/, "", s); gsub(/\\"/, "\"", s); gsub(/\\u0026/, "\\&", s)
		gsub(/\\u003c/, "<", s); gsub(/\\u003e/, ">", s); gsub(/\\t/, "    ", s)
		return s
	}
	{ a = field("Action"); t = field("Test") }
'

# summary LOG: the counts of a -test.v=test2json log, and each reason the
# tests gave for a skip, with how many skipped for it.
summary() {
	"$GO" tool test2json <"$1" | awk "$JSON_AWK"'
		t == "" { next }
		a == "output" {
			o = text(field("Output"))
			if (o ~ /^ *[^ :]+\.go:[0-9]+: /) { sub(/^ *[^ :]+\.go:[0-9]+: /, "", o); said[t] = o }
		}
		a == "pass" { pass++ }
		a == "fail" { fail++ }
		a == "skip" {
			skip++
			r = (t in said) ? said[t] : "(no reason given)"
			if (!(r in why)) order[n++] = r
			why[r]++
		}
		END {
			printf "%d passed, %d failed, %d skipped by the tests\n", pass, fail, skip
			for (i = 0; i < n; i++) printf "    skipped (%d): %s\n", why[order[i]], order[i]
		}
	'
}

# failures LOG: what each failed test of a -test.v=test2json log printed
# (its last 80 lines), then the last 40 lines printed outside any test (a
# panic, -test.timeout's).
failures() {
	"$GO" tool test2json <"$1" | awk "$JSON_AWK"'
		a == "output" {
			k = (t == "") ? "\001" : t
			line[k, ++cnt[k]] = text(field("Output"))
		}
		a == "fail" && t != "" {
			print "    --- FAIL: " t
			for (i = (cnt[t] > 80 ? cnt[t] - 79 : 1); i <= cnt[t]; i++) print "    | " line[t, i]
		}
		END {
			k = "\001"
			for (i = (cnt[k] > 40 ? cnt[k] - 39 : 1); i <= cnt[k]; i++) print "    | " line[k, i]
		}
	'
}

WINE=
BIN=
FAILED=0
RAN=0
LOCKED=     # set: each run holds the engine's lock
EXTRA_SKIP= # a -test.skip pattern of tests another run ran already
WAITED=0    # seconds spent waiting for the engine's lock
server=

# run PKG RUN ENV...: PKG's Windows test binary under Wine, from PKG's
# folder, with -test.run RUN and the list's skips, in the environment ENV.
# Its output goes to a file: a pipe would be held open by Wine's services
# when the program starts the prefix's wineserver.
run() {
	local pkg=$1 re=$2 skip log rc t0=$SECONDS start lock=()
	start=$(date +%s)
	shift 2
	skip=$(skip_pattern "$pkg")
	[ -z "$EXTRA_SKIP" ] || skip=${skip:+$skip|}$EXTRA_SKIP
	log=$BIN/$(echo "$pkg" | tr / _).$RAN.log
	RAN=$((RAN + 1))
	# The lock's wait is told apart from the run's own time.
	# shellcheck disable=SC2016 # for sh -c
	[ -z "$LOCKED" ] || [ -z "$ENGINE_LOCK" ] || lock=(flock "$ENGINE_LOCK" sh -c 'date +%s >"$0" && exec "$@"' "$BIN/locked")
	rm -f "$BIN/locked"
	# shellcheck disable=SC2016 # the patterns are shown quoted, as typed
	echo "windows gate: ${*:+$* }wine64 $pkg.test.exe -test.run '$re'${skip:+ -test.skip '$skip'}"
	# A run that failed having printed nothing at all, not even a test
	# binary's first line, is Wine not starting the program (seen once in
	# make test: exit 1 within a second, an empty log, while the same
	# binary passed by hand): said, and run once more. Any run that
	# printed something counts as it ended.
	local try
	for try in 1 2; do
		set +e
		(
			cd "$ROOT/$pkg" &&
				"${lock[@]}" env "$@" "$WINE" "$BIN/$(echo "$pkg" | tr / _).test.exe" -test.v=test2json -test.count=1 \
					-test.timeout="$TIMEOUT" -test.run "$re" ${skip:+-test.skip "$skip"}
		) </dev/null >"$log" 2>&1
		rc=$?
		set -e
		if [ $rc -eq 0 ] || [ -s "$log" ] || [ $try -eq 2 ]; then break; fi
		echo "    wine64 exited $rc within $((SECONDS - t0)) s and printed nothing: Wine did not start $pkg.test.exe; once more"
	done
	local took="$((SECONDS - t0)) s"
	if [ -s "$BIN/locked" ]; then
		local waited=$(($(cat "$BIN/locked") - start))
		WAITED=$((WAITED + waited))
		took="$((SECONDS - t0 - waited)) s, after $waited s waiting for $ENGINE_LOCK"
	fi
	if [ $rc -eq 0 ]; then
		echo "    ok $pkg in $took: $(summary "$log")"
	else
		FAILED=1
		echo "    FAIL $pkg (exit $rc) in $took: $(summary "$log")"
		failures "$log"
	fi
	show_skips "$pkg"
}

# engine_lock CMD...: CMD, holding the engine's lock when there is one.
engine_lock() {
	if [ -n "$ENGINE_LOCK" ]; then
		flock "$ENGINE_LOCK" "$@"
	else
		"$@"
	fi
}

# answers HOST: the engine at tcp://HOST answers GET /_ping.
answers() {
	local hp=${1#tcp://} reply
	exec {c}<>"/dev/tcp/${hp%:*}/${hp##*:}" || return 1
	printf 'GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n' >&"$c"
	reply=$(timeout 10 cat <&"$c") || true
	exec {c}>&-
	[[ $reply == *$'\r\n\r\nOK'* ]]
}

gate() {
	local t0=$SECONDS pfx ov sock host
	pfx=$(prefix)
	export WINEPREFIX=$pfx
	WINE=$(find_wine)
	server=$(find_wineserver)
	echo "windows gate: $(version), prefix $pfx; $("$GO" env GOVERSION) windows/amd64 test binaries"
	"$server" -k 2>/dev/null || true
	BIN=$(mktemp -d /tmp/rz-wine-gate.XXXXXX)
	trap '"$server" -k 2>/dev/null || true; rm -rf "$BIN"' EXIT
	# Kept up between the test binaries (its services start in seconds), for
	# at most 10 minutes after the last Windows process should the gate be
	# killed before its wineserver -k.
	start_detached "$BIN/wineserver.log" "$server" -p600
	"$WINE" cmd.exe /c exit 0 </dev/null >"$BIN/wine-services.log" 2>&1 || die "Wine does not start a program (cmd.exe)"
	# What failed tests left in the prefix's temporary folder goes.
	rm -rf "$pfx"/drive_c/users/*/Temp/* "$pfx"/drive_c/users/*/AppData/Local/Temp/* 2>/dev/null || true

	ov=$(overlay)
	local t1=$SECONDS pkgs=(internal/ledger ledger internal/backend/memory internal/reaper sandboxtest internal/backend/docker)
	for p in "${pkgs[@]}"; do
		(cd "$ROOT" && GOOS=windows GOARCH=amd64 CGO_ENABLED=0 "$GO" test -c -overlay "$ov" \
			-o "$BIN/$(echo "$p" | tr / _).test.exe" "./$p") || die "building the Windows test binary of ./$p failed"
	done
	echo "windows gate: built ${#pkgs[@]} Windows test binaries in $((SECONDS - t1)) s (with -overlay: Go's deleteat falls back where Wine 8 has no POSIX delete)"

	local none=(RIGHTSIZE_SKIP_ENGINE_TESTS=1 DOCKER_HOST=tcp://127.0.0.1:9)
	run internal/ledger . "${none[@]}"
	run ledger . "${none[@]}"
	run internal/backend/memory . "${none[@]}"
	run internal/reaper . "${none[@]}"
	run sandboxtest . "${none[@]}"

	# The Docker engine, over TCP on loopback.
	case ${DOCKER_HOST:-} in
	'' | unix://*) sock=${DOCKER_HOST:-} sock=${sock#unix://} sock=${sock:-/var/run/docker.sock} ;;
	tcp://*) host=$DOCKER_HOST ;;
	*) sock= ;;
	esac
	if [ -z "${host:-}" ] && [ -S "${sock:-}" ]; then
		coproc FORWARD { cd "$ROOT" && exec "$GO" run scripts/wine/forward.go "$sock"; }
		read -r -t 120 host <&"${FORWARD[0]}" || host=
	fi
	if [ -z "${host:-}" ]; then
		echo "windows gate: the Docker engine's tests are skipped: no engine to reach over TCP (DOCKER_HOST=${DOCKER_HOST:-}, no socket at ${sock:-/var/run/docker.sock})"
	elif ! answers "$host"; then
		echo "windows gate: the Docker engine's tests are skipped: the engine at $host does not answer"
	elif [ ! -f "$BUSYBOX" ]; then
		echo "windows gate: the Docker engine's tests are skipped: no static busybox at $BUSYBOX for the test images (make engine installs one as root on Debian)"
	else
		echo "windows gate: the Docker engine at $host${sock:+ (forwarded to $sock)}"
		local t2=$SECONDS s2
		s2=$(date +%s)
		# shellcheck disable=SC2016 # for sh -c
		(cd "$ROOT" && "$GO" test -c -o "$BIN/testimage.test" ./internal/testimage >"$BIN/images.log" 2>&1 &&
			cd internal/testimage && engine_lock sh -c 'date +%s >"$0" && exec "$@"' "$BIN/locked" \
			"$BIN/testimage.test" -test.count=1 -test.run '^(TestBusybox|TestNoShell|TestVolume)$' >"$BIN/images.log" 2>&1) ||
			die "the test images could not be built with the Linux toolchain: $(cat "$BIN/images.log")"
		local waited=$(($(cat "$BIN/locked") - s2))
		WAITED=$((WAITED + waited))
		echo "windows gate: the test images are on the engine, built for Linux ($((SECONDS - t2 - waited)) s, after $waited s waiting for ${ENGINE_LOCK:-nothing})"
		local eng=(DOCKER_HOST="$host" RIGHTSIZE_BUSYBOX="Z:${BUSYBOX//\//\\}" TESTCONTAINERS_RYUK_DISABLED=true)
		LOCKED=1
		run internal/backend/docker . "${eng[@]}"
		EXTRA_SKIP='^TestMemory' run sandboxtest . "${eng[@]}"
	fi
	echo "windows gate: $([ $FAILED -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - t0 - WAITED)) s under $(version) (and $WAITED s waiting for ${ENGINE_LOCK:-nothing})"
	return $FAILED
}

case ${1:-} in
available) available ;;
install) install ;;
prefix) prefix ;;
version) version ;;
gate)
	install
	# One gate at a time on a prefix: a second one's wineserver -k would
	# end the first's processes. flock -o: no Windows process inherits the
	# lock (Wine's services outlive the program that started them).
	mkdir -p "$(dirname "$(prefix_dir)")"
	exec flock -o "$(dirname "$(prefix_dir)")/gate.lock" bash "${BASH_SOURCE[0]}" gate-locked
	;;
gate-locked) gate ;;
*) die "usage: wine.sh available|install|prefix|version|gate" ;;
esac
