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
//   - A connection the engine took over becomes a plain byte pipe both
//     ways: a 101 Switching Protocols (an upgraded attach or exec start,
//     BuildKit's session), or the 200 and raw stream that attach and exec
//     start answer older clients with. A half-close of either side is
//     passed on to the other: a client that closes its stdin (CloseWrite)
//     half-closes the engine's side. Nothing else is a take-over: dockerd
//     answers a CONNECT to its debug routes with 200 and keeps reading
//     requests, each of which is seen as usual. An answer whose body ends
//     with the connection is forwarded to its end, and the client's
//     connection closed with it.
//   - A client that hangs up while an answer streams is passed on to the
//     engine, as if it had been connected directly.
//   - The creates, POST [/v{version}]/containers/create and
//     [/v{version}]/networks/create, and Podman's own
//     /v{version}/libpod/containers/create and /libpod/networks/create,
//     are read whole (a body larger than MaxCreateBody is refused with a
//     413), decoded (numbers kept as they were written), shown to
//     Hook.Admit, given its labels and name, and forwarded with a
//     corrected Content-Length; a create the hook refuses is answered with
//     a 500 and its reason, and never reaches the engine. The engine's
//     success (201; 200 for Podman's network create) is read (it is small;
//     up to 1 MiB is held) so that Hook.Created hears the id before the
//     client does; then it is forwarded as it came. Any other outcome is
//     Hook.Failed, with the status.
//   - A named volume's create, POST [/v{version}]/volumes/create, is a
//     create as above (its name in the body). An image build, POST
//     [/v{version}]/build, is shown to Hook.Admit with the labels of its
//     query's "labels" parameter, which is then set to those merged with
//     the hook's; its body (the build context) and its answer (the
//     build's progress) stream as they came, so Created is never called
//     for it. Podman's own volume create and build are forwarded as they
//     came. A DELETE of a volume or an image, and their prunes, are
//     removals as below.
//   - What creates containers the hook cannot label — a Podman pod
//     (libpod/pods/create), play kube, a restore from a checkpoint — is
//     refused with a 403 that says why, and never reaches the engine.
//   - A removal the engine answered 2xx (DELETE of a container or network,
//     a prune, a container's wait, the removal of a Podman pod or of what
//     play kube made) is told to Hook.Removed before the client has the
//     answer's body (its head is forwarded at once: a wait's client waits
//     for it before it starts the container).
//
// What it must never do: alter a request other than those creates and
// a build's query (nor their answers, nor any answer); buffer a body other than a create's
// without bound; log, print or keep a request's or an answer's body (they
// carry environment variables, credentials, registry auth); retry a
// request the engine may have seen (a connection the engine closed
// between requests is redialed before a request is sent, never after);
// decide anything about what a create means: the hook decides, the proxy
// only asks it (and refuses what it cannot ask about); let a create it
// cannot show the hook reach the engine.
package apiproxy
