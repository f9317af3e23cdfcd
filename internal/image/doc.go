// Package image owns building container images FROM scratch: a root file
// system assembled in memory (a static busybox and its applet links, any
// other files), imported into the engine as a single layer. No builder
// (BuildKit or legacy) is involved, and the same call works from API 1.40
// on.
//
// It is also the one place that knows where the static busybox comes from
// (FindBusybox): RIGHTSIZE_BUSYBOX, else a static /bin/busybox, else a copy
// of the official BusyboxImage's /bin/busybox cached in the user's cache
// folder, else that copy made now, pulling the image when a registry can be
// reached. With a busybox on the host, as on the CI machine, nothing is ever
// pulled.
//
// Both the test images (internal/testimage) and the image of `rightsize
// demo` are made here; what goes into each, and how it is tagged, is theirs
// to decide.
//
// The package only adds images. The one exception is the copy out of
// BusyboxImage: the container it is made through (never started) is always
// removed, and the image is removed again when this package pulled it.
// Nothing else is ever removed from the engine or created on it.
package image
