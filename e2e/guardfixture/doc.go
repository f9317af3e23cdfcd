// Package guardfixture is a fixture of the crash matrix (row 15): a test
// binary whose TestMain uses sandboxtest.Main with GuardAll, and whose
// test creates containers and a network in every way a Go suite does
// without rightsize's help — testcontainers-go's GenericContainer and a
// module (redis, with an exec and a log consumer), the Docker client, a
// `docker run -d` subprocess — none of them tracked. e2e runs it; run
// alone (RZ_GUARDALL_FIXTURE unset) its test skips.
package guardfixture
