// Package image owns building container images FROM scratch where no
// registry can be reached: a root file system assembled in memory (a static
// busybox and its applet links, any other files), imported into the engine
// as a single layer. Nothing is pulled, no builder (BuildKit or legacy) is
// involved, and the same call works from API 1.40 on.
//
// Both the test images (internal/testimage) and the image of `rightsize
// demo` are made here; what goes into each, and how it is tagged, is theirs
// to decide.
//
// The package only adds images: it must never remove anything from the
// engine, nor create containers.
package image
