// Package backend owns what rightsize-go needs from a sandbox engine, and
// nothing else: the Backend interface the reaper removes leftovers through,
// the Driver interface tests create sandboxes through, the errors callers
// must tell apart (not found, in use, engine unreachable), and resolution —
// which engine this process uses (RIGHTSIZE_BACKEND, else Docker when an
// engine answers).
//
// One sub-package per engine registers itself here: backend/docker (on
// testcontainers-go), backend/msb (the microsandbox command line),
// backend/memory (no engine: sandboxes that are files of this host), and
// backend/kubernetes (client-go; linked only where a program imports it).
//
// This package knows nothing of the ledger or of testing, and it must never
// decide whether something may be removed: it removes what it is told to
// and reports, per name, exactly how that went.
package backend
