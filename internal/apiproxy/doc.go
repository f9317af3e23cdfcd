// Package apiproxy is a proxy of the Docker Engine API on a private unix
// socket: a process points DOCKER_HOST at it (for itself and its
// children), and every container and network any library or program of
// it creates through the API (testcontainers-go, ory/dockertest, the moby
// client, a `docker run` subprocess) is shown to a Hook before the engine
// creates it, labelled as the hook says, and reported to it with the
// engine's id once created. GuardAll is built on it: its hook writes each
// create to the ledger first, so that the watchdog finds and removes what
// a dead test left.
//
// What it owns: the listening socket (mode 0600, removed by Close), the
// connections to it, and one connection to the engine for each of them
// (dialed at the client connection's first request, with a timeout; an
// engine that cannot be reached is a 502 naming it, never a hang). It
// speaks HTTP/1.x only, to unix and plain tcp engines (no TLS, no ssh).
//
// What it does:
//
//   - Every request is forwarded to the engine as it came, byte for byte,
//     and its answer back as it came, as the bytes arrive: log follows,
//     event streams, pulls and builds stream through. Chunked bodies keep
//     their chunk lines. Keep-alive and pipelining are the client's.
//   - An upgraded connection (attach and exec start: 101 Switching
//     Protocols; or 200 and a raw stream, for older clients; or a body that
//     ends with the connection) becomes a plain byte pipe both ways, and a
//     half-close of either side is passed on to the other: a client that
//     closes its stdin (CloseWrite) half-closes the engine's side.
//   - A client that hangs up while an answer streams is passed on to the
//     engine, as if it had been connected directly.
//   - The two creates, POST [/v{version}]/containers/create and
//     POST [/v{version}]/networks/create, are read whole (a body larger
//     than MaxCreateBody is refused with a 413), decoded (numbers kept as
//     they were written), shown to Hook.Admit, given its labels and name,
//     and forwarded with a corrected Content-Length; a create the hook
//     refuses is answered with a 500 and its reason, and never reaches the
//     engine. The engine's 201 is read (it is small; up to 1 MiB is held)
//     so that Hook.Created hears the id before the client does; then it is
//     forwarded as it came. Any other outcome is Hook.Failed.
//
// What it must never do: alter a request other than those two creates
// (nor their answers, nor any answer); buffer a body other than a create's
// without bound; log, print or keep a request's or an answer's body (they
// carry environment variables, credentials, registry auth); retry a
// request the engine may have seen (a connection the engine closed
// between requests is redialed before a request is sent, never after);
// decide anything about what a create means: the hook decides, the proxy
// only asks it.
package apiproxy
