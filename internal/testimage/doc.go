// Package testimage owns the container images the engine tests of
// rightsize-go run. Each image is imported into the engine from a root file
// system assembled FROM scratch (with package internal/image, which
// `rightsize demo` uses too) out of a static busybox and /server, a small Go
// program built on the spot from ./server. The busybox is the host's
// (RIGHTSIZE_BUSYBOX, else a static /bin/busybox): where the tests run in
// CI no registry can be reached and nothing is ever pulled. A laptop
// without one gets a copy out of the official busybox image instead, pulled
// once and cached (image.FindBusybox).
//
//   - [Busybox]: /bin/busybox with an applet link in /bin for every applet it
//     has (sh, sleep, setsid, kill, nc, wget, …), /server, /tmp; its command
//     is "sleep 3600", which as PID 1 ignores SIGTERM, as a real image does.
//   - [NoShell]: /server alone; its command is "/server" (port 8080).
//
// An image is tagged with a hash of what went into it and carries the label
// dev.rightsize.test-image=1. It is built once per engine and then kept: it is
// not a container, nothing of a test's is left running because it stays,
// and the next test binary finds it with one API call. Concurrent test
// binaries serialize the build on a file lock and check again once they
// hold it.
//
// A missing engine or busybox fails the calling test and says how to get
// one: a skip would hide a broken setup. RIGHTSIZE_SKIP_ENGINE_TESTS=1 skips
// instead. RIGHTSIZE_BUSYBOX names another static Linux busybox than
// /bin/busybox.
//
// This package must never remove anything from the engine, nor create
// containers: tests do that, and clean up after themselves. (The copy out
// of the busybox image is internal/image's, which removes what it made.)
package testimage
